#pragma once
// Start-up steps every driver takes the same way (poly_train, mnist_train): the OpenMP threads
// of a rank, the ranks' agreement on their parse, a writable output directory, the reducer's
// options and --bucket-mb auto, and main() itself (driver_main). Header-only.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <thread>

#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/distributed/bucket_autosize.h>
#include <hddp/distributed/ddp.h>  // param_layout
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/reducer.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/training_run.h>
#include "common/run_options.h"

namespace hddp::drivers {

// OpenMP threads per rank: `requested` if > 0, else OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK,
// else this node's cores divided among the ranks on it.
inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  for (const char* var : {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  int local = 1;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(v));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / local);
}

// Rank 0 checks that a directory is (or can be made) writable; every rank learns the verdict
// ("" or the error, naming `flag`).
inline std::string check_out_dir(const mpi::Env& env, const std::string& dir, const char* flag = "--out") {
  std::string err;
  if (env.root()) {
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 && mkdir(dir.c_str(), 0755) != 0)
      err = std::string(flag) + ": cannot create directory '" + dir + "'";
    else if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      err = std::string(flag) + ": '" + dir + "' is not a directory";
    else if (access(dir.c_str(), W_OK) != 0)
      err = std::string(flag) + ": directory '" + dir + "' is not writable";
  }
  return mpi::bcast_string(err, 0, env.comm());
}

// Every rank parsed its own command line (and --config file) before MPI started: the verdict
// and what was parsed must be the same everywhere, else the ranks would part ways (one exits,
// the others wait for it in their first collective). "" or the error, the same on every rank.
inline std::string agree_on_options(const mpi::Env& env, const std::string& err, uint64_t source_hash) {
  int failed = err.empty() ? 0 : 1, any = 0;
  uint64_t lo = 0, hi = 0;
  HDDP_MPI(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, env.comm()));
  HDDP_MPI(MPI_Allreduce(&source_hash, &lo, 1, MPI_UINT64_T, MPI_MIN, env.comm()));
  HDDP_MPI(MPI_Allreduce(&source_hash, &hi, 1, MPI_UINT64_T, MPI_MAX, env.comm()));
  const std::string root = mpi::bcast_string(err, 0, env.comm());
  if (!root.empty()) return root;
  if (any) return "the options could not be parsed on every rank (a --config file on a node-local path?)";
  if (lo != hi) return "the command line or the --config file differs between ranks; give every rank the same";
  return "";
}


// Rank 0 checks that the files named by output flags ({flag, path}; "" paths skipped) can be
// created in their directories; every rank learns the verdict ("" or the error).
inline std::string check_output_files(const mpi::Env& env, const std::vector<std::pair<const char*, std::string>>& files) {
  std::string err;
  if (env.root())
    for (const auto& [flag, path] : files)
      if (!path.empty() && !(err = file_creation_error(path)).empty()) {
        err = std::string(flag) + ": " + err;
        break;
      }
  return mpi::bcast_string(err, 0, env.comm());
}

// The reducer as the parallelism options ask for it.
// "auto" caps start at the defaults; autosize() replaces them.
inline ReducerOptions reducer_options(const cli::ParallelOptions& o) {
  const cli::ParallelOptions d;
  ReducerOptions r;
  r.bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.bucket_mb.value_or(*d.bucket_mb) * 1048576.0));
  r.first_bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.first_bucket_mb.value_or(*d.first_bucket_mb) * 1048576.0));
  r.mode = o.mode;
  r.bf16_wire = o.bf16_grads;
  // Thread mode: on the core OpenMP leaves free, if any (OMP_PLACES=cores OMP_PROC_BIND=close
  // and OMP_NUM_THREADS below the rank's cores); else it shares the master's.
  r.progress_cpu = spare_progress_cpu();
  return r;
}

// The run kit's options (train/training_run.h) as the shared option groups give them; the
// driver adds its program name, steps per epoch, identity, records and schedule.
inline TrainingRunOptions training_run_options(const cli::TrainingOptions& t, const cli::ParallelOptions& p,
                                               const cli::CheckpointOptions& c) {
  TrainingRunOptions r;
  r.epochs = t.epochs, r.clip_grad_norm = t.clip_grad_norm;
  r.checkpoint = c.checkpoint, r.resume = c.resume, r.checkpoint_every = c.checkpoint_every, r.check_every = c.check_every;
  r.timeout_s = p.timeout, r.reducer = reducer_options(p);
  r.names = {.checkpoint = "--checkpoint", .resume = "--resume", .epochs = "--epochs"};
  return r;
}

// --bucket-mb auto (distributed/bucket_autosize.h): every distinct bucket plan tried for a few
// real steps on the job's own network, on `batch` samples from a stream of its own (seed,
// 1000 + rank): the training samples and parameters are untouched; every rank builds the same
// buckets. tune_first: --first-bucket-mb auto too. Rank 0 prints the choice and what it rests
// on; the result goes to --stats-json (autosize_json).
inline AutosizeResult autosize(const mpi::Env& env, Sequential<float>& model, int64_t batch, uint64_t seed,
                               bool tune_first, ReducerOptions& r) {
  Rng warm(seed, 1000 + uint64_t(env.rank()));
  std::vector<float> wx(size_t(batch * model.in_features())), wy(size_t(batch * model.out_features()));
  for (auto& v : wx) v = warm.uniform(-1.0f, 1.0f);
  for (auto& v : wy) v = warm.uniform(-0.9f, 0.9f);
  AutosizeOptions ao;
  ao.tune_first = tune_first;
  ao.first_cap_bytes = r.first_bucket_cap_bytes;
  if (env.root()) {  // a large model's trial takes a while: say so first
    const size_t plans = trial_caps(param_layout(model.param_views()), sizeof(float), ao).size();
    std::printf("bucket caps: auto: trying %zu plan(s) on this network, %d rounds of %d steps each...\n", plans,
                ao.trial_rounds, ao.trial_steps + 1);
    std::fflush(stdout);
  }
  const AutosizeResult a = autosize_buckets(env.comm(), model, wx.data(), batch, wy.data(), ao, r);
  r.bucket_cap_bytes = a.plan.cap_bytes;
  r.first_bucket_cap_bytes = a.plan.first_cap_bytes;
  if (env.root()) {
    std::string tried;
    char buf[96];
    for (const PlanTrial& t : a.trials) {
      std::snprintf(buf, sizeof buf, "%s%s: %zu buckets %.3g ms", tried.empty() ? "" : ", ",
                    format_bytes(t.cap_bytes).c_str(), t.num_buckets, 1e3 * t.step_s);
      tried += buf;
    }
    std::printf("bucket caps: auto -> %s (first bucket %s), %zu buckets: %.3g ms per step, the fastest of %zu plans "
                "tried on this network (the fewest buckets within %.0f %%); measured in %.2f s\n"
                "  plans tried (cap: step): %s\n"
                "  allreduce fit %.3g us + %.3g us/MiB, backward %.3g ms\n",
                format_bytes(a.plan.cap_bytes).c_str(), format_bytes(a.plan.first_cap_bytes).c_str(), a.plan.num_buckets,
                1e3 * a.step_s, a.trials.size(), 100.0 * ao.trial_tie_rel, a.measure_seconds, tried.c_str(),
                1e6 * a.model.alpha, 1e6 * 1048576.0 * a.model.beta, 1e3 * a.profile.total);
  }
  return a;
}

// --bucket-mb auto's choice and measurements as one JSON object (a --stats-json line).
std::string autosize_json(const AutosizeResult& a);

// What a driver's main() parsed before MPI started (so the thread level can follow
// --reduce-mode): the verdict ("" or the message), the options' hash, whether --help was given.
struct Parsed {
  explicit Parsed(const char* program) : prog(program) {}
  const char* prog;          // "poly_train": in "<prog>: error: ..." and "Try '<prog> --help'."
  std::string error;         // "" or the usage error
  uint64_t source_hash = 0;  // hddp::cli::parse's
  bool help = false;
  std::string help_text;
  int thread_level = 0;      // for MPI_Init_thread
};

// The body of every driver's main(): MPI, the ranks' agreement on the parse, then `checks`
// (usage checks that need MPI: a writable --out; "" or the message, the same on every rank);
// a usage error: rank 0 prints it, every rank returns 2 before any training; --help: rank 0
// prints it, all return 0; else run(env). An exception anywhere ends every rank (abort_all,
// exit 1). MPI lives in this outer scope, so the handler runs while it is still initialised:
// an exception that unwound past the Env first would MPI_Finalize this rank, which waits for
// the others, which wait for this rank in the reducer: a hang instead of an abort.
inline int driver_main(const Parsed& p, int* argc, char*** argv, const std::function<std::string(const mpi::Env&)>& checks,
                       const std::function<int(mpi::Env&)>& run) {
  std::unique_ptr<mpi::Env> env;
  try {
    env = std::make_unique<mpi::Env>(argc, argv, p.thread_level);
    std::string err = agree_on_options(*env, p.error, p.source_hash);
    if (err.empty() && !p.help) err = checks(*env);
    if (!err.empty()) {
      if (env->root()) std::fprintf(stderr, "%s: error: %s\nTry '%s --help'.\n", p.prog, err.c_str(), p.prog);
      return 2;
    }
    if (p.help) {
      if (env->root()) std::fputs(p.help_text.c_str(), stdout);
      return 0;
    }
    return run(*env);
  } catch (const std::exception& e) {
    mpi::abort_all(1, e.what());  // ends every rank: no rank waits forever for this one
  } catch (...) {
    mpi::abort_all(1, "unknown exception");
  }
}

}  // namespace hddp::drivers
