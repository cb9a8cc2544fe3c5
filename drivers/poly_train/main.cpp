// poly_train: the PyTorch DDP tutorial's polynomial fit, data-parallel over MPI ranks with
// OpenMP inside each rank. Run `poly_train --help`.
//
// Each epoch every rank draws a batch, runs forward, loss, backward (gradient buckets are
// reduced by MPI_Iallreduce while backward continues) and an optimizer step; after backward
// every rank holds the same averaged gradients, so the parameters stay identical everywhere.
//
// The pieces, one job each:
//   options.h    the command line, typed          problem.h  f, the scalers, the model's layers
//   sampler.h    a batch per epoch                guard.h    signals, NaN/Inf, the ranks' agreement
//   run_state.h  loss history, checkpoint save and resume (one explicit operation)
//   report.h     epoch lines, progress, the outputs and summary at the end
// Faults (README "Faults"; exit codes in options.h): on a signal every rank finishes its step,
// rank 0 writes a checkpoint, all exit 75; on NaN/Inf all stop before the optimizer step,
// keeping the last checkpoint, exit 3; a throwing rank prints its message and MPI_Abort ends
// every rank (main); a stalled collective ends the job through the watchdog, exit 4.
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/driver_setup.h"
#include <hddp/core/optim.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/core/rng.h>
#include <hddp/core/trace.h>
#include <hddp/distributed/affinity.h>
#include <hddp/distributed/bucket_autosize.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/kernels/gemm.h>
#include "poly_train/guard.h"
#include "poly_train/options.h"
#include "poly_train/problem.h"
#include "poly_train/report.h"
#include "poly_train/run_state.h"
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
  return kExitUsage;
}

std::unique_ptr<hddp::Optimizer<float>> make_optimizer(const Options& o, int64_t n) {
  if (o.optimizer == OptimizerKind::Adam) return std::make_unique<hddp::Adam<float>>(n, hddp::AdamHyper{.lr = o.lr});
  return std::make_unique<hddp::SGD<float>>(n, hddp::SgdHyper{.lr = o.lr, .momentum = o.momentum});
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

hddp::ReducerOptions reducer_options(const Options& o, hddp::Watchdog& watchdog) {
  hddp::ReducerOptions r;
  // "auto" caps start at the defaults; autosize() replaces them.
  const Options d;
  r.bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.bucket_mb.value_or(*d.bucket_mb) * 1048576.0));
  r.first_bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.first_bucket_mb.value_or(*d.first_bucket_mb) * 1048576.0));
  r.mode = o.mode;
  // Thread mode: on the core OpenMP leaves free, if any (OMP_PLACES=cores OMP_PROC_BIND=close
  // and OMP_NUM_THREADS below the rank's cores); else it shares the master's.
  r.progress_cpu = hddp::spare_progress_cpu();
  r.watchdog = &watchdog;  // the buckets wait through it, so a rank that stops arriving is named
  return r;
}

// --bucket-mb auto (distributed/bucket_autosize.h): a few allreduces and a warm-up
// forward/backward on a batch from its own stream (the training samples and parameters are
// untouched); rank 0 decides, every rank builds the same buckets.
void autosize(const Env& env, const Options& o, hddp::Sequential<float>& model, hddp::ReducerOptions& r) {
  const int64_t n = o.batch_size;
  hddp::Rng warm(o.seed, 1000 + uint64_t(env.rank()));
  std::vector<float> wx(static_cast<size_t>(n)), wy(static_cast<size_t>(n));
  for (auto& v : wx) v = warm.uniform(-1.0f, 1.0f);
  for (auto& v : wy) v = warm.uniform(-0.9f, 0.9f);
  hddp::AutosizeOptions ao;
  ao.tune_first = !o.first_bucket_mb;
  ao.first_cap_bytes = r.first_bucket_cap_bytes;
  const hddp::AutosizeResult a = hddp::autosize_buckets(env.comm(), model, wx.data(), n, wy.data(), ao, r);
  r.bucket_cap_bytes = a.plan.cap_bytes;
  r.first_bucket_cap_bytes = a.plan.first_cap_bytes;
  if (env.root())
    std::printf("bucket caps: auto -> %s (first bucket %s), %zu buckets; predicted exposed communication %.3g ms "
                "per step (allreduce fit: %.3g us + %.3g us/MiB, backward %.3g ms); measured in %.2f s\n",
                hddp::format_bytes(a.plan.cap_bytes).c_str(), hddp::format_bytes(a.plan.first_cap_bytes).c_str(),
                a.plan.num_buckets, 1e3 * a.plan.exposed, 1e6 * a.model.alpha, 1e6 * 1048576.0 * a.model.beta,
                1e3 * a.profile.total, a.measure_seconds);
}

// --debug-inject-nan / --debug-throw (tests): rank `rank` sees a NaN input or throws at `epoch`.
void inject_faults(const Options& o, int rank, int64_t epoch, float* x) {
  if (epoch == o.inject_nan.epoch && rank == o.inject_nan.rank) x[0] = std::numeric_limits<float>::quiet_NaN();
  if (epoch == o.inject_throw.epoch && rank == o.inject_throw.rank)
    throw hddp::Error("injected failure (--debug-throw) at epoch " + std::to_string(epoch) + " on rank " +
                      std::to_string(rank));
}

// --export: the weights as safetensors, with what it takes to use them: the layers, the
// function, and the scalers (x and y mapped from [min, max] to [-1, 1]).
void export_weights(const Options& o, const std::vector<hddp::LayerSpec>& layers, const Scalers& scale,
                    const hddp::Sequential<float>& model) {
  std::string l;
  for (const hddp::LayerSpec& s : layers) l += (l.empty() ? "" : " -> ") + s.name();
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
  const std::vector<hddp::LayerSpec> layers = build_layers(o.hidden);
  hddp::Rng init(o.seed, 0);
  hddp::Sequential<float> model(layers, std::max<int64_t>(o.batch_size, 256), init);
  const std::unique_ptr<hddp::Optimizer<float>> opt = make_optimizer(o, model.num_params());
  Sampler sampler(o, scale, rank, size);

  // The stall watchdog (--timeout): every collective of a step waits through it.
  hddp::Watchdog watchdog(env.comm(), hddp::WatchdogOptions{.timeout_s = o.timeout, .exit_code = kExitStall});
  if (!o.init.empty())  // the starting weights (every rank loads the same file), then resume or not
    if (const std::string err = init_weights(env, o.init, model); !err.empty()) return usage_error(env, err);
  RunState state(env, o, watchdog, model, *opt, sampler.rng(), run_identity(o, layers));
  if (const std::string err = state.resume(); !err.empty()) return usage_error(env, err);  // nothing trained
  watchdog.set_note([&] {
    const std::string kept = state.kept_note();
    return kept + (kept.rfind("; ", 0) == 0 ? ": continue with --resume" : "");
  });

  std::unique_ptr<hddp::Trace> trace = o.trace.empty() ? nullptr : std::make_unique<hddp::Trace>(rank);
  hddp::ReducerOptions ropt = reducer_options(o, watchdog);
  if (!o.bucket_mb) autosize(env, o, model, ropt);
  hddp::DistributedModel ddp(env.comm(), model, ropt, trace.get());  // checks the model is the same everywhere
  ddp.set_check_finite(true);  // each layer's local gradients, before its bucket is launched
  Guard guard(env, o, watchdog, state.start(), [&] { return state.kept_note(); });

  open_stats(env, o);
  std::printf("Running DDP on rank %d/%d.\n", rank, size);
  std::fflush(stdout);
  if (rank == 0 && !o.checkpoint.empty()) {
    if (state.start() > 0)
      std::fprintf(stderr, "poly_train: resumed from '%s' at epoch %lld of %lld\n", o.checkpoint.c_str(),
                   (long long)state.start(), (long long)o.epochs);
    else if (o.resume)
      std::fprintf(stderr, "poly_train: no checkpoint '%s' yet: starting from scratch\n", o.checkpoint.c_str());
  }

  // Ends the run on every rank together: everyone has printed and (rank 0) written before
  // any rank exits, because mpiexec tears the job down at the first non-zero exit.
  auto stop_together = [&](int code) {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Request req;
    HDDP_MPI(MPI_Ibarrier(env.comm(), &req));
    watchdog.wait(&req, "the barrier before stopping");
    return code;
  };
  // A checkpoint of `done` epochs, unless the state is not finite (then false: stop, exit 3;
  // `when` says when and what happened, for the message).
  auto checkpoint = [&](int64_t done, const char* when) {
    if (o.checkpoint.empty()) return true;
    if (!state.state_finite()) {
      if (rank == 0)
        std::fprintf(stderr, "poly_train: error: the parameters or optimizer state are not finite %s%s\n", when,
                     state.kept_note().c_str());
      return false;
    }
    state.save(done);
    return true;
  };

  // After an epoch that is not the last: the checkpoint it is due, and the stop a signal asks
  // for. 0 to go on, else the exit code.
  auto checkpoint_or_stop = [&](int64_t epoch, bool due, int signal) {
    if ((due || signal) && !checkpoint(epoch + 1, ("after epoch " + std::to_string(epoch) + "; all ranks stopped").c_str()))
      return kExitNonFinite;
    if (!signal) return 0;
    if (rank == 0)
      std::fprintf(stderr, "poly_train: %s: all ranks stopped after %lld of %lld epochs; %s (exit code %d)\n",
                   signal_name(signal), (long long)(epoch + 1), (long long)o.epochs,
                   o.checkpoint.empty() ? "no --checkpoint, so the progress is lost"
                                        : ("checkpoint '" + o.checkpoint + "' written: continue with --resume").c_str(),
                   kExitStopped);
    return kExitStopped;
  };

  // The step loop: the tutorial's five lines, the guard's verdict, the bookkeeping.
  const int64_t local = sampler.rows();
  std::vector<float> x(static_cast<size_t>(local)), y(static_cast<size_t>(local));
  const auto t_start = Clock::now();
  for (int64_t epoch = state.start(); epoch < o.epochs; ++epoch) {
    Clock::time_point t[4] = {Clock::now()};  // start, loss, backward, optimizer step done
    watchdog.set_epoch(epoch);
    sampler.next(x.data(), y.data());
    if (epoch == state.start() && rank == 0 && !o.save_batch.empty()) save_batch(o.save_batch, x, y);
    inject_faults(o, rank, epoch, x.data());
    model.zero_grad();
    model.forward(x.data(), local);
    const float loss = model.loss(y.data());
    t[1] = Clock::now();
    ddp.backward(y.data());
    t[2] = Clock::now();
    const bool checkpoint_due = o.checkpoint_every > 0 && (epoch + 1) % o.checkpoint_every == 0;
    const Guard::Verdict v = guard.check(epoch, loss, ddp, checkpoint_due);
    if (v.non_finite) return stop_together(kExitNonFinite);
    opt->step(model.params(), model.grads());
    t[3] = Clock::now();
    summary.times.add(t, trace.get());
    state.record(epoch, loss);
    log_epoch(env, o, epoch, loss, state.start(), t_start);
    if (epoch + 1 < o.epochs)
      if (const int code = checkpoint_or_stop(epoch, checkpoint_due, v.signal)) return stop_together(code);
  }
  summary.times.total = hddp::seconds_since(t_start);
  summary.start = state.start();
  flush_logs();
  state.sync_losses(o.epochs);
  // The final checkpoint: a later --resume with more --epochs continues from here.
  if (!checkpoint(o.epochs, "at the end; final checkpoint not written")) return stop_together(kExitNonFinite);
  report_run(env, o, summary, ddp, scale, state.history(), trace.get());
  if (rank == 0 && !o.export_path.empty()) export_weights(o, layers, scale, model);
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
        install_stop_handlers();  // after MPI_Init, so nothing Open MPI installs can replace them
        const int rc = run(env, opts);
        flush_logs();  // after a stop: what the launcher had not taken yet
        return rc;
      });
}
