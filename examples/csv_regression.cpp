// csv_regression: an MLP fitted data-parallel to the numeric columns of a CSV file, with what a
// real run needs from the run kit: checkpoints and --resume, SIGTERM/SIGUSR1 -> checkpoint ->
// exit 75, NaN/Inf -> exit 3, metrics summed over the ranks, metrics.csv and loss.pdf.
//   mpiexec -n 2 csv_regression DATA.csv TARGET OUT [EPOCHS [CHECKPOINT]]
// Every column but TARGET is a feature; both are scaled to [-1, 1]. A signal is acted on at
// the end of the epoch it arrives in (epochs of a CSV file are short).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/scaler.h>
#include <hddp/data/csv.h>
#include <hddp/data/sampler.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/train/exit_code.h>
#include <hddp/train/metrics.h>
#include <hddp/train/plot.h>
#include <hddp/train/run_file.h>
#include <hddp/train/run_log.h>
#include <hddp/train/stop_guard.h>

using namespace hddp;

int train(mpi::Env& env, int argc, char** argv) {
  const int64_t batch = 32, epochs = argc > 4 ? std::atoll(argv[4]) : 20;
  std::string err = argc < 4 || epochs < 1 ? "usage: csv_regression DATA.csv TARGET OUT [EPOCHS [CHECKPOINT]]" : "";
  Dataset d;
  if (err.empty()) try {
      d = read_csv(argv[1], {.targets = {argv[2]}});
    } catch (const Error& e) {
      err = user_message(e.what());
    }
  if (!(err = agree_on_error(env, err)).empty()) {
    if (env.root()) std::fprintf(stderr, "csv_regression: %s\n", err.c_str());
    return code(Exit::Usage);  // every rank, before any training
  }
  MinMaxScaler sx(-1, 1), sy(-1, 1);  // fitted on the whole file: the same on every rank
  sx.fit(d.x.data(), d.count, d.features()), sx.transform(d.x.data(), d.count, d.features(), d.x.data());
  sy.fit(d.y.data(), d.count, d.target_width), sy.transform(d.y.data(), d.count, d.target_width, d.y.data());

  Rng init(1);
  Sequential<float> model({Linear(d.features(), 64), ReLU(), Linear(64, 64), ReLU(), Linear(64, d.target_width)}, batch, init);
  Adam<float> adam(model.num_params(), {.lr = 1e-3});
  const DistributedSampler sampler(d.count, 7, env.rank(), env.size());
  const int64_t steps = sampler.steps(batch);
  Watchdog watchdog(env.comm(), {.timeout_s = 300, .exit_code = code(Exit::Stall)});
  RunFile run(env, watchdog, {.path = argc > 5 ? argv[5] : "", .resume = true, .identity = {{"layers", model.describe()},
              {"data", std::string(argv[1]) + ", " + std::to_string(d.count) + " rows"}}, .total_steps = epochs * steps});
  if (!(err = run.resume(model.arena(), adam)).empty()) {
    if (env.root()) std::fprintf(stderr, "csv_regression: %s\n", err.c_str());
    return code(Exit::Usage);
  }
  MetricsTable metrics({"epoch", "mse"});
  if (run.start() > 0) metrics = MetricsTable::decode(run.records().at("metrics"), {"epoch", "mse"}, "the checkpoint");

  DistributedModel ddp(env.comm(), model);  // rank 0's weights on every rank
  ddp.set_check_finite(true);
  StopGuard guard(env, watchdog, {.program = "csv_regression", .total_steps = epochs * steps}, run.start(),
                  [&] { return run.kept_note(); });
  std::vector<float> x(size_t(batch * d.features())), y(size_t(batch * d.target_width));
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t epoch = run.start() / steps; epoch < epochs; ++epoch) {
    const std::vector<int64_t> order = sampler.order(epoch + 1);
    RankSums sums;
    int stop = 0;
    for (int64_t s = 0; s < steps; ++s) {  // the step: forward, loss, backward, verdict, update
      const int64_t rows = std::min(batch, sampler.per_rank() - s * batch);
      d.gather(order.data() + s * batch, rows, x.data(), y.data());
      model.zero_grad();
      model.forward(std::span(x).first(size_t(rows * d.features())), rows);
      const float loss = model.loss(y.data());
      ddp.backward(y.data());
      const StopGuard::Verdict v = guard.check(epoch * steps + s, loss, ddp, s + 1 == steps);
      if (v.non_finite) return finish_together(env, watchdog, Exit::NonFinite);
      adam.step(model.params(), model.grads());
      sums.add("sse", double(loss) * double(rows)), sums.add("rows", double(rows));
      stop = stop ? stop : v.signal;
    }
    const RankSums::Totals t = sums.reduce(env, &watchdog, "the epoch's loss");
    metrics.add({double(epoch + 1), t.at("sse") / t.at("rows")});
    run.save((epoch + 1) * steps, model.arena(), adam, nullptr, {{"metrics", metrics.encode()}});
    if (env.root())
      std::printf("epoch %lld/%lld: mse %.5f (scaled), %s\n", (long long)(epoch + 1), (long long)epochs,
                  metrics.rows().back()[1], eta(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), (epoch + 1) * steps - run.start(), (epochs - epoch - 1) * steps).c_str());
    if (stop && epoch + 1 < epochs) {
      if (env.root()) std::fprintf(stderr, "csv_regression: %s: stopped after epoch %lld%s\n", signal_name(stop), (long long)(epoch + 1), run.kept_note().c_str());
      return finish_together(env, watchdog, Exit::Stopped);
    }
  }
  if (env.root()) {
    const std::string out = argv[3];
    metrics.write_csv(out + "/metrics.csv");
    Series mse{"training MSE", "with linespoints lw 2 pt 7", {}};
    for (const std::vector<double>& r : metrics.rows()) mse.points.emplace_back(r[0], r[1]);
    if (gnuplot_available()) plot_pdf(out + "/loss.pdf", {{"Training loss", "epoch", "MSE (scaled)", {mse}, "", ""}});
    std::printf("wrote %s/metrics.csv%s\n", out.c_str(), gnuplot_available() ? " and loss.pdf" : "");
  }
  return code(Exit::Ok);
}

int main(int argc, char** argv) {
  mpi::Env env(&argc, &argv);
  install_stop_handlers();
  try {
    return train(env, argc, argv);
  } catch (const std::exception& e) {
    mpi::abort_all(code(Exit::Error), e.what());  // every rank ends: none waits for this one
  }
}
