// poly_train: the PyTorch DDP tutorial's polynomial fit, data-parallel over MPI ranks with
// OpenMP inside each rank. Run `poly_train --help`.
//
// Each epoch every rank draws a batch, runs forward, loss, backward (gradient buckets are
// reduced by MPI_Iallreduce while backward continues) and an optimizer step; after backward
// every rank holds the same averaged gradients, so the parameters stay identical everywhere.
// One step per epoch: the run kit's steps (hddp/train) are epochs here.
//
// The pieces, one job each:
//   options.h    the command line, typed          problem.h  f, the scalers, the model's layers
//   sampler.h    a batch per epoch                history.h  every rank's loss per epoch
//   report.h     epoch lines, progress, the outputs and summary at the end
//   the run kit  hddp::TrainingRun: ends every step (the ranks' verdict on signals and
//                NaN/Inf, the update, the checkpoint, the stop), hddp::Exit (exit codes)
// Faults (README "Faults"): on a signal every rank finishes its step, rank 0 writes a
// checkpoint, all exit 75; on NaN/Inf all stop before the optimizer step, keeping the last
// checkpoint, exit 3; a throwing rank prints its message and MPI_Abort ends every rank (main);
// a stalled collective ends the job through the watchdog, exit 4.
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/driver_setup.h"
#include <hddp/core/loss.h>
#include <hddp/core/optim.h>
#include <hddp/core/schedule.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/core/rng.h>
#include <hddp/core/trace.h>
#include <hddp/distributed/affinity.h>
#include <hddp/distributed/bucket_autosize.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/exit_code.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/training_run.h>
#include <hddp/kernels/gemm.h>
#include "poly_train/history.h"
#include "poly_train/options.h"
#include "poly_train/problem.h"
#include "poly_train/report.h"
#include "poly_train/sampler.h"

namespace poly {
namespace {

using Clock = std::chrono::steady_clock;
using hddp::mpi::Env;

int usage_error(const Env& env, const std::string& err) {  // every rank gets here together
  if (env.root()) std::fprintf(stderr, "poly_train: error: %s\n", err.c_str());
  return hddp::code(hddp::Exit::Usage);
}

// The run's identity in a checkpoint: what must be the same for a resume to continue it.
std::map<std::string, std::string> run_identity(const Options& o, const hddp::Sequential<float>& model) {
  std::map<std::string, std::string> id = hddp::cli::identity_of(o);
  id["function"] = to_string(o.function), id["layers"] = model.describe(), id["sampling"] = to_string(o.sampling);
  return id;
}

// Placement (distributed/affinity.h): where every rank's threads run. Rank 0 warns about ranks
// that take turns on the same cores (a step then runs hundreds of times slower), and prints the
// whole report with --report-affinity.
std::vector<hddp::RankPlacement> report_placement(const Env& env, const Options& o) {
  std::vector<hddp::RankPlacement> placement = hddp::gather_placement(env.comm());
  if (!env.root()) return placement;
  if (o.report_affinity)
    for (const hddp::RankPlacement& p : placement) std::printf("affinity: %s\n", hddp::describe(p, env.size()).c_str());
  std::fflush(stdout);
  for (const std::string& w : hddp::placement_warnings(placement)) std::fprintf(stderr, "poly_train: warning: %s\n", w.c_str());
  return placement;
}

// --debug-inject-nan / --debug-throw (tests): rank `rank` sees a NaN input or throws at `epoch`
// (1-based, like every epoch in messages).
void inject_faults(const Options& o, int rank, int64_t epoch, float* x) {
  if (epoch == o.inject_nan.epoch && rank == o.inject_nan.rank) x[0] = std::numeric_limits<float>::quiet_NaN();
  if (epoch == o.inject_throw.epoch && rank == o.inject_throw.rank)
    throw hddp::Error("injected failure (--debug-throw) at epoch " + std::to_string(epoch) + " on rank " +
                      std::to_string(rank));
}

// --export: the weights as safetensors, with what it takes to use them: the layers, the
// function, and the scalers (x and y mapped from [min, max] to [-1, 1]).
void export_weights(const Options& o, const Scalers& scale, const hddp::Sequential<float>& model) {
  const std::string l = model.describe();

  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"hddp.layers", l}, {"hddp.function", to_string(o.function)},
      {"hddp.epochs", std::to_string(o.epochs)}, {"hddp.scaler_range", "-1,1"},
      {"hddp.x_min", hddp::exact_string(scale.x.data_min()[0])}, {"hddp.x_max", hddp::exact_string(scale.x.data_max()[0])},
      {"hddp.y_min", hddp::exact_string(scale.y.data_min()[0])}, {"hddp.y_max", hddp::exact_string(scale.y.data_max()[0])}};
  hddp::save_weights(o.export_path, model.arena(), meta);
  std::printf("exported the weights to %s (safetensors)\n", o.export_path.c_str());
}

// --debug-save-batch (tests): the batch as CSV "x,y", scaled, full float precision.
void save_batch(const std::string& path, const std::vector<float>& x, const std::vector<float>& y) {
  std::string csv = "x,y\n";
  char line[96];
  for (size_t i = 0; i < x.size(); ++i) {
    std::snprintf(line, sizeof line, "%.9g,%.9g\n", x[i], y[i]);
    csv += line;
  }
  hddp::write_file_atomic(path, csv);
}

int run(Env& env, const Options& o) {
  const int rank = env.rank(), size = env.size();
  const int threads = hddp::drivers::resolve_threads(o.threads);
  omp_set_num_threads(threads);
  if (o.gemm) hddp::set_gemm_backend(*o.gemm);
  for (const auto* in : {&o.inject_nan, &o.inject_throw})
    if (in->epoch >= 0 && in->rank >= size)
      return usage_error(env, std::string("--debug-") + (in == &o.inject_nan ? "inject-nan" : "throw") + ": rank " +
                                  std::to_string(in->rank) + " does not exist (" + std::to_string(size) + " rank(s))");
  const std::string err = hddp::drivers::check_output_files(
      env, {{"--trace", o.trace}, {"--stats-json", o.stats_json}, {"--export", o.export_path}});
  if (!err.empty()) return usage_error(env, err);
  RunSummary summary;
  summary.threads = threads;
  summary.placement = report_placement(env, o);

  // The problem, the model (every rank builds it from the seed; resume and replication make
  // the ranks equal), the optimizer, the samples, the loss.
  const Scalers scale = fit_scalers(o.function);
  hddp::Rng init(o.seed, 0);
  hddp::Sequential<float> model(build_layers(o.hidden), std::max<int64_t>(o.batch_size, 256), init);
  model.set_precision(o.precision);
  const std::unique_ptr<hddp::Optimizer<float>> opt = hddp::cli::make_optimizer(o, model.num_params());
  hddp::LrSchedule schedule = hddp::LrSchedule::constant(o.lr);
  try {
    schedule = hddp::cli::make_schedule(o, o.epochs);
  } catch (const hddp::cli::UsageError& e) {
    return usage_error(env, e.what());
  }
  Sampler sampler(o, scale, rank, size);
  hddp::MseLoss<float> mse(model.out_features());

  // The run kit: one step per epoch; the checkpoint keeps every rank's losses and sampler.
  std::unique_ptr<hddp::Trace> trace = o.trace.empty() ? nullptr : std::make_unique<hddp::Trace>(rank);
  LossHistory history(env, o.epochs);
  hddp::TrainingRunOptions ro = hddp::drivers::training_run_options(o, o, o);
  ro.program = "poly_train", ro.identity = run_identity(o, model), ro.rng = &sampler.rng(), ro.schedule = &schedule;
  ro.trace = trace.get(), ro.state = &history;
  ro.epoch_loss = false;  // the tutorial's log: each rank's own loss, no reduction per epoch
  if (!o.bucket_mb) hddp::drivers::autosize(env, model, o.batch_size, o.seed, !o.first_bucket_mb, ro.reducer);
  hddp::TrainingRun run(env, model, *opt, ro);
  if (!o.init.empty())  // the starting weights (every rank loads the same file), then resume or not
    if (const std::string e = hddp::load_weights_everywhere(env, run.watchdog(), o.init, model.arena()); !e.empty())
      return usage_error(env, e);
  if (const std::string e = run.begin(); !e.empty()) return usage_error(env, e);  // nothing trained
  const int64_t start = run.first_step();
  open_stats(env, o);
  std::printf("Running DDP on rank %d/%d.\n", rank, size);
  std::fflush(stdout);

  // The step loop: the tutorial's five lines, then the run kit ends the step (verdict, update,
  // checkpoint, stop); the epoch's bookkeeping after the update.
  const int64_t local = sampler.rows();
  std::vector<float> x(static_cast<size_t>(local)), y(static_cast<size_t>(local));
  const auto t_start = Clock::now();
  Clock::time_point t[4];  // start, loss, backward, optimizer step done
  double loss = 0;
  const auto epoch_end = [&](const hddp::EpochEnd& e) {
    const int64_t epoch = e.epoch;
    t[3] = Clock::now();
    summary.times.add(t, trace.get());
    history.record(epoch, float(loss));
    log_epoch(env, o, epoch, float(loss), start, t_start);
  };
  for (int64_t epoch = start; epoch < o.epochs; ++epoch) {
    t[0] = Clock::now();
    sampler.next(x.data(), y.data());
    if (epoch == start && rank == 0 && !o.save_batch.empty()) save_batch(o.save_batch, x, y);
    inject_faults(o, rank, epoch + 1, x.data());
    model.zero_grad();
    loss = mse.forward(model.forward(x, local), y.data(), local);
    t[1] = Clock::now();
    run.ddp().backward(mse.grad());
    t[2] = Clock::now();
    if (const std::optional<int> exit = run.end_step(epoch, loss, local, epoch_end)) return *exit;
  }
  summary.times.total = hddp::seconds_since(t_start);
  summary.start = start;
  flush_logs();
  history.sync(o.epochs, run.watchdog());
  report_run(env, o, summary, run.ddp(), model, scale, history.all(), trace.get());
  if (rank == 0 && !o.export_path.empty()) export_weights(o, scale, model);
  return 0;
}

}  // namespace
}  // namespace poly

int main(int argc, char** argv) {
  using namespace poly;
  hddp::drivers::Parsed p{"poly_train"};
  Options opts;
  try {
    opts = parse_options(argc - 1, argv + 1);
  } catch (const UsageError& e) {
    p.error = e.what();
  }
  p.source_hash = opts.source_hash, p.help = opts.help, p.thread_level = hddp::required_thread_level(opts.mode);
  if (p.help) p.help_text = help_text("poly_train");
  return hddp::drivers::driver_main(
      p, &argc, &argv, [&](const Env& env) { return hddp::drivers::check_out_dir(env, opts.out); },
      [&](Env& env) {
        hddp::install_stop_handlers();  // after MPI_Init, so nothing Open MPI installs can replace them
        const int rc = run(env, opts);
        flush_logs();  // after a stop: what the launcher had not taken yet
        return rc;
      });
}
