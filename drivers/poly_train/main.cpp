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
//   the run kit  hddp::StopGuard (signals, NaN/Inf, the ranks' agreement), hddp::RunFile
//                (checkpoint and resume), hddp::Exit (exit codes)
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
#include <hddp/train/run_file.h>
#include <hddp/train/stop_guard.h>
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

// Rank 0 checks that the output files named by flags can be created, before any training;
// every rank learns the verdict.
std::string check_output_files(const Env& env, const Options& o) {
  std::string err;
  if (env.root())
    for (const auto& [flag, path] : {std::pair{"--trace", &o.trace}, std::pair{"--stats-json", &o.stats_json},
                                     std::pair{"--export", &o.export_path}}) {
      if (path->empty()) continue;
      const size_t slash = path->find_last_of('/');
      const std::string dir = slash == std::string::npos ? "." : path->substr(0, slash + 1);
      if (access(dir.c_str(), W_OK | X_OK) != 0) {
        err = std::string(flag) + ": cannot write into directory '" + dir + "'";
        break;
      }
    }
  return hddp::mpi::bcast_string(err, 0, env.comm());
}

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
  auto num = [](double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.17g", v);
    return std::string(b);
  };
  const std::map<std::string, std::string> meta = {
      {"format", "pt"}, {"hddp.layers", l}, {"hddp.function", to_string(o.function)},
      {"hddp.epochs", std::to_string(o.epochs)}, {"hddp.scaler_range", "-1,1"},
      {"hddp.x_min", num(scale.x.data_min()[0])}, {"hddp.x_max", num(scale.x.data_max()[0])},
      {"hddp.y_min", num(scale.y.data_min()[0])}, {"hddp.y_max", num(scale.y.data_max()[0])}};
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
  if (const std::string err = check_output_files(env, o); !err.empty()) return usage_error(env, err);
  RunSummary summary;
  summary.threads = threads;
  summary.placement = report_placement(env, o);

  // The problem, the model (every rank builds it from the seed; resume and replication make
  // the ranks equal), the optimizer, the samples.
  const Scalers scale = fit_scalers(o.function);
  hddp::Rng init(o.seed, 0);
  hddp::Sequential<float> model(build_layers(o.hidden), std::max<int64_t>(o.batch_size, 256), init);
  model.set_precision(o.precision);
  const std::unique_ptr<hddp::Optimizer<float>> opt = hddp::cli::make_optimizer(o, model.num_params());
  std::optional<hddp::LrSchedule> schedule;  // every step's learning rate, from the optimizer's step count
  try {
    schedule = hddp::cli::make_schedule(o, o.epochs);
  } catch (const hddp::cli::UsageError& e) {
    return usage_error(env, e.what());
  }
  Sampler sampler(o, scale, rank, size);

  // The stall watchdog (--timeout): every collective of a step, of --init and of the resume
  // waits through it.
  hddp::Watchdog watchdog(env.comm(), hddp::WatchdogOptions{.timeout_s = o.timeout, .exit_code = hddp::code(hddp::Exit::Stall)});
  if (!o.init.empty())  // the starting weights (every rank loads the same file), then resume or not
    if (const std::string err = hddp::load_weights_everywhere(env, watchdog, o.init, model.arena()); !err.empty())
      return usage_error(env, err);
  hddp::RunFile run_file(env, watchdog, {.path = o.checkpoint, .resume = o.resume, .identity = run_identity(o, model),
                                         .total_steps = o.epochs, .unit = "epochs"});
  LossHistory history(env, watchdog, o.epochs);
  if (std::string err = run_file.resume(model.arena(), *opt, &sampler.rng()); !err.empty())
    return usage_error(env, err);  // nothing trained
  const int64_t start = run_file.start();
  if (start > 0) try {
      const auto rec = run_file.records().find("losses");
      HDDP_CHECK(rec != run_file.records().end(), "it holds no loss history (not poly_train's)");
      history.restore(rec->second, start, "its loss history");
    } catch (const hddp::Error& e) {
      return usage_error(env, "--resume: cannot use checkpoint '" + o.checkpoint + "': " + hddp::user_message(e.what()));
    }
  const auto kept = [&] { return run_file.kept_note(); };

  std::unique_ptr<hddp::Trace> trace = o.trace.empty() ? nullptr : std::make_unique<hddp::Trace>(rank);
  hddp::ReducerOptions ropt = hddp::drivers::reducer_options(o, watchdog);
  if (!o.bucket_mb) hddp::drivers::autosize(env, model, o.batch_size, o.seed, !o.first_bucket_mb, ropt);
  hddp::DistributedModel ddp(env.comm(), model, ropt, trace.get());  // checks the model is the same everywhere
  ddp.set_check_finite(true);  // each layer's local gradients, before its bucket is launched
  hddp::StopGuard guard(env, watchdog,
                        {.program = "poly_train", .total_steps = o.epochs, .check_every = o.check_every,
                         .where = [](int64_t e) { return "epoch " + std::to_string(e + 1); }},
                        start, kept);

  open_stats(env, o);
  std::printf("Running DDP on rank %d/%d.\n", rank, size);
  std::fflush(stdout);
  if (rank == 0 && !o.checkpoint.empty()) {
    if (start > 0)
      std::fprintf(stderr, "poly_train: resumed from '%s' after epoch %lld of %lld\n", run_file.resumed_from().c_str(),
                   (long long)start, (long long)o.epochs);
    else if (o.resume)
      std::fprintf(stderr, "poly_train: no checkpoint '%s' yet: starting from scratch\n", o.checkpoint.c_str());
  }

  auto stop_together = [&](hddp::Exit code) { return hddp::finish_together(env, watchdog, code); };
  // The checkpoint after `done` epochs, unless the state is not finite (then false: stop, exit
  // 3; `when` says when and what happened, for the message).
  auto checkpoint = [&](int64_t done, const std::string& when) {
    if (!run_file.enabled()) return true;
    if (!hddp::RunFile::finite(model.arena(), *opt)) {
      if (rank == 0)
        std::fprintf(stderr, "poly_train: error: the parameters or optimizer state are not finite %s%s\n", when.c_str(),
                     kept().c_str());
      return false;
    }
    history.sync(done);
    run_file.save(done, model.arena(), *opt, &sampler.rng(), {{"losses", env.root() ? history.record_bytes(done) : ""}});
    return true;
  };
  // After an epoch that is not the last: the checkpoint it is due, and the stop a signal asks
  // for. Ok to go on, else the exit code.
  auto checkpoint_or_stop = [&](int64_t epoch, bool due, int signal) {
    if ((due || signal) && !checkpoint(epoch + 1, "after epoch " + std::to_string(epoch + 1) + "; all ranks stopped"))
      return hddp::Exit::NonFinite;
    if (!signal) return hddp::Exit::Ok;
    if (rank == 0)
      std::fprintf(stderr, "poly_train: %s: all ranks stopped after %lld of %lld epochs; %s (exit code %d)\n",
                   hddp::signal_name(signal), (long long)(epoch + 1), (long long)o.epochs,
                   o.checkpoint.empty() ? "no --checkpoint, so the progress is lost"
                                        : ("checkpoint '" + o.checkpoint + "' written: continue with --resume").c_str(),
                   hddp::code(hddp::Exit::Stopped));
    return hddp::Exit::Stopped;
  };

  // The step loop: the tutorial's five lines, the guard's verdict, the bookkeeping.
  const int64_t local = sampler.rows();
  std::vector<float> x(static_cast<size_t>(local)), y(static_cast<size_t>(local));
  const auto t_start = Clock::now();
  for (int64_t epoch = start; epoch < o.epochs; ++epoch) {
    Clock::time_point t[4] = {Clock::now()};  // start, loss, backward, optimizer step done
    watchdog.set_epoch(epoch + 1);
    sampler.next(x.data(), y.data());
    if (epoch == start && rank == 0 && !o.save_batch.empty()) save_batch(o.save_batch, x, y);
    inject_faults(o, rank, epoch + 1, x.data());
    model.zero_grad();
    model.forward(x, local);
    const float loss = model.loss(y.data());
    t[1] = Clock::now();
    ddp.backward(y.data());
    t[2] = Clock::now();
    const bool checkpoint_due = o.checkpoint_every > 0 && (epoch + 1) % o.checkpoint_every == 0;
    const hddp::StopGuard::Verdict v = guard.check(epoch, loss, ddp, checkpoint_due);
    if (v.non_finite) return stop_together(hddp::Exit::NonFinite);
    if (o.clip_grad_norm > 0) hddp::clip_grad_norm(model.num_params(), model.grads(), o.clip_grad_norm);
    schedule->apply(*opt);
    opt->step(model.params(), model.grads());
    t[3] = Clock::now();
    summary.times.add(t, trace.get());
    history.record(epoch, loss);
    log_epoch(env, o, epoch, loss, start, t_start);
    if (epoch + 1 < o.epochs)
      if (const hddp::Exit code = checkpoint_or_stop(epoch, checkpoint_due, v.signal); code != hddp::Exit::Ok)
        return stop_together(code);
  }
  summary.times.total = hddp::seconds_since(t_start);
  summary.start = start;
  flush_logs();
  // The final checkpoint: a later --resume with more --epochs continues from here.
  if (!checkpoint(o.epochs, "at the end; final checkpoint not written")) return stop_together(hddp::Exit::NonFinite);
  history.sync(o.epochs);
  report_run(env, o, summary, ddp, scale, history.all(), trace.get());
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
