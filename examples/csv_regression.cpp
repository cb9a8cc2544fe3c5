// csv_regression: an MLP fitted data-parallel to the numeric columns of a CSV file, with what a
// real run needs from the run kit: checkpoints and --resume, SIGTERM/SIGUSR1 -> checkpoint ->
// exit 75 (inside an epoch too), NaN/Inf -> exit 3, metrics summed over the ranks, metrics.csv
// and loss.pdf.
//   mpiexec -n 2 csv_regression DATA.csv TARGET OUT [EPOCHS [CHECKPOINT]]
// Every column but TARGET is a feature; both are scaled to [-1, 1].
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/scaler.h>
#include <hddp/data/csv.h>
#include <hddp/data/sampler.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/metrics_table.h>
#include <hddp/train/plot.h>
#include <hddp/train/training_run.h>

using namespace hddp;

int usage(const mpi::Env& env, const std::string& err) {
  if (env.root()) std::fprintf(stderr, "csv_regression: %s\n", err.c_str());
  return code(Exit::Usage);  // every rank, before any training
}

int train(mpi::Env& env, int argc, char** argv) {
  const int64_t batch = 32, epochs = argc > 4 ? std::atoll(argv[4]) : 20;
  std::string err = argc < 4 || epochs < 1 ? "usage: csv_regression DATA.csv TARGET OUT [EPOCHS [CHECKPOINT]]" : "";
  Dataset d;
  if (err.empty()) try {
      d = read_csv(argv[1], {.targets = {argv[2]}});
    } catch (const Error& e) {
      err = user_message(e.what());
    }
  if (!(err = agree_on_error(env, err)).empty()) return usage(env, err);
  MinMaxScaler sx(-1, 1), sy(-1, 1);  // fitted on the whole file: the same on every rank
  sx.fit(d.x.data(), d.count, d.features()), sx.transform(d.x.data(), d.count, d.features(), d.x.data());
  sy.fit(d.y.data(), d.count, d.target_width), sy.transform(d.y.data(), d.count, d.target_width, d.y.data());

  Rng init(1);
  Sequential<float> model({Linear(d.features(), 64), ReLU(), Linear(64, 64), ReLU(), Linear(64, d.target_width)}, batch, init);
  Adam<float> adam(model.num_params(), {.lr = 1e-3});
  const DistributedSampler sampler(d.count, 7, env.rank(), env.size());
  const int64_t steps = sampler.steps(batch);
  // The kit keeps the metrics and the epoch's loss sums (a checkpoint inside an epoch too).
  TrainingRun run(env, model, adam,
                  {.program = "csv_regression", .epochs = epochs, .steps_per_epoch = steps,
                   .checkpoint = argc > 5 ? argv[5] : "", .resume = true,
                   .identity = {{"layers", model.describe()}, {"data", std::string(argv[1]) + ", " + std::to_string(d.count) + " rows"}},
                   .checkpoint_every = 1, .metrics = {"epoch", "mse"}});
  if (!(err = run.begin()).empty()) return usage(env, err);
  MetricsTable& metrics = run.metrics();
  const auto epoch_end = [&](const EpochEnd& e) {  // after the epoch's last update: the MSE over every row
    metrics.add({double(e.epoch + 1), e.train_loss});
    if (env.root())
      run.log().line("epoch %lld/%lld: mse %.5f (scaled), %s\n", (long long)(e.epoch + 1), (long long)epochs, e.train_loss,
                     eta(run.train_seconds(), (e.epoch + 1) * steps - run.first_step(), (epochs - e.epoch - 1) * steps).c_str());
  };
  MseLoss<float> mse(d.target_width);
  std::vector<float> x(size_t(batch * d.features())), y(size_t(batch * d.target_width));
  std::vector<int64_t> order;
  for (int64_t step = run.first_step(); step < run.total_steps(); ++step) {  // forward, loss, backward; the kit ends it
    const int64_t s = step % steps, rows = std::min(batch, sampler.per_rank() - s * batch);
    if (s == 0 || order.empty()) order = sampler.order(step / steps + 1);
    d.gather(order.data() + s * batch, rows, x.data(), y.data());
    model.zero_grad();
    const double loss = mse.forward(model.forward(std::span(x).first(size_t(rows * d.features())), rows), y.data(), rows);
    run.ddp().backward(mse.grad());
    if (const std::optional<int> exit = run.end_step(step, loss, rows, epoch_end)) return *exit;
  }
  run.log().flush();
  if (env.root()) {
    const std::string out = argv[3];
    metrics.write_csv(out + "/metrics.csv");
    Series curve{"training MSE", "with linespoints lw 2 pt 7", {}};
    for (const std::vector<double>& r : metrics.rows()) curve.points.emplace_back(r[0], r[1]);
    const bool plot = gnuplot_or_warn("loss.pdf", "metrics.csv");
    if (plot) plot_pdf(out + "/loss.pdf", {{"Training loss", "epoch", "MSE (scaled)", {curve}, "", ""}});
    std::printf("wrote %s/metrics.csv%s\n", out.c_str(), plot ? " and loss.pdf" : "");
  }
  return code(Exit::Ok);
}

int main(int argc, char** argv) {
  mpi::Env env(&argc, &argv);
  install_stop_handlers();
  try {
    return train(env, argc, argv);
  } catch (const std::exception& e) {
    mpi::abort_all(code(Exit::Error), user_message(e.what()));  // every rank ends: none waits for this one
  }
}
