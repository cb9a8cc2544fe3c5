// poly_train: the PyTorch DDP tutorial's polynomial fit, data-parallel over MPI ranks with
// OpenMP inside each rank. Run `poly_train --help`.
//
// Each epoch every rank draws a batch, runs forward, loss, backward (gradient buckets are
// reduced by MPI_Iallreduce while backward continues) and an optimizer step; after backward
// every rank holds the same averaged gradients, so the parameters stay identical everywhere.
//
// Faults (see --help, exit codes in options.h):
//   - Checkpoints (--checkpoint, --checkpoint-every, --resume; format in core/checkpoint.h):
//     rank 0 gathers every rank's data-RNG state and losses and writes parameters, optimizer
//     state, epoch and loss history atomically. A resumed run continues bitwise.
//   - SIGTERM/SIGUSR1 only set a flag. Every --check-every epochs (and at every checkpoint
//     and the last epoch) the ranks agree with one MPI_Allreduce of two int64 (MIN): the
//     signal, and the earliest (epoch, rank) whose loss or own gradients were not finite.
//     The agreement happens at the same epochs on every rank, so all stop together: on a
//     signal after finishing the step, with a checkpoint (exit 75); on NaN/Inf before the
//     optimizer step, keeping the last checkpoint, which only ever holds finite state (exit 3).
//     Averaged gradients are the same on every rank, so a non-finite one makes every rank
//     join the agreement at that very epoch.
//   - A throwing rank prints its message and calls MPI_Abort (main); a rank that dies makes
//     mpiexec end the job (tests/faults).
#include <mpi.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/checkpoint.h"
#include "core/optim.h"
#include "core/rng.h"
#include "core/scaler.h"
#include "core/trace.h"
#include "distributed/affinity.h"
#include "distributed/bucket_autosize.h"
#include "distributed/ddp.h"
#include "distributed/mpi_env.h"
#include "distributed/watchdog.h"
#include "drivers/common/gnuplot.h"
#include "drivers/common/line_log.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "poly_train/options.h"
#include "poly_train/problem.h"
#include "poly_train/report.h"

namespace {

// The stop request: the signal number, set by the handler (a lock-free atomic is
// async-signal-safe, and, unlike a volatile sig_atomic_t, also well defined when the signal
// lands on another thread, e.g. an OpenMP worker or Open MPI's progress thread).
std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free);
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig, std::memory_order_relaxed); }

void install_stop_handlers() {
  struct sigaction sa{};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGTERM, SIGUSR1}) HDDP_CHECK(sigaction(sig, &sa, nullptr) == 0, "sigaction: " << std::strerror(errno));
}

const char* signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal"; }

// hddp::Error messages start with "file.cpp:123: "; users need only the rest.
std::string user_message(const std::string& what) {
  const size_t p = what.find(".cpp:");
  if (p == std::string::npos) return what;
  const size_t q = what.find(": ", p + 5);
  return q == std::string::npos ? what : what.substr(q + 2);
}

// The per-epoch lines (stdout, every rank) and rank 0's progress lines (stderr): they never
// block training, so a launcher that stops reading cannot keep the ranks from a signal's
// checkpoint (drivers/common/line_log.h). Flushed, blocking, once training is over.
hddp::drivers::LineLog g_log(stdout), g_progress(stderr);

using Clock = std::chrono::steady_clock;
using hddp::mpi::Env;
using poly::Options;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// OMP threads per rank: --threads, else OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else this
// node's cores divided among the ranks on it.
int resolve_threads(const Options& o) {
  if (o.threads > 0) return o.threads;
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

std::vector<hddp::LayerSpec> build_layers(const std::vector<int64_t>& hidden) {
  // The tutorial: Linear(1, 20) -> Linear(20, 1, bias=False) -> tanh; with more hidden layers,
  // tanh between them.
  std::vector<hddp::LayerSpec> l{hddp::Linear(1, hidden[0])};
  for (size_t i = 1; i < hidden.size(); ++i) {
    l.push_back(hddp::Tanh());
    l.push_back(hddp::Linear(hidden[i - 1], hidden[i]));
  }
  l.push_back(hddp::Linear(hidden.back(), 1, false));
  l.push_back(hddp::Tanh());
  return l;
}

// Rank 0 checks that --out is (or can be made) a writable directory; every rank learns the
// verdict, so all of them stop together on a bad one.
std::string check_out_dir(const Env& env, const std::string& dir) {
  std::string err;
  if (env.root()) {
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 && mkdir(dir.c_str(), 0755) != 0)
      err = "--out: cannot create directory '" + dir + "'";
    else if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      err = "--out: '" + dir + "' is not a directory";
    else if (access(dir.c_str(), W_OK) != 0)
      err = "--out: directory '" + dir + "' is not writable";
  }
  int len = static_cast<int>(err.size());
  HDDP_MPI(MPI_Bcast(&len, 1, MPI_INT, 0, env.comm()));
  err.resize(len);
  if (len) HDDP_MPI(MPI_Bcast(err.data(), len, MPI_CHAR, 0, env.comm()));
  return err;
}

// --check-every 0: agree about every kCheckPeriod seconds of training, at most every
// kMaxCheckInterval epochs (one MPI_Allreduce of 3 int64 costs 1-30 us here, 3 ranks on 2
// cores; a tutorial step 45 us).
constexpr double kCheckPeriod = 0.005;
constexpr int64_t kMaxCheckInterval = 1000;

struct PhaseTimes {
  double forward = 0, backward = 0, optimizer = 0, total = 0;
};

// The run's identity in a checkpoint: what must be the same for a resume to continue it.
std::map<std::string, std::string> run_identity(const Options& o, const std::vector<hddp::LayerSpec>& layers) {
  std::string l;
  for (const hddp::LayerSpec& s : layers) l += (l.empty() ? "" : " -> ") + hddp::to_string(s);
  char lr[64];
  std::snprintf(lr, sizeof lr, "%.17g", o.lr);
  std::map<std::string, std::string> id{{"function", o.function},     {"layers", l},
                                        {"optimizer", o.optimizer},   {"lr", lr},
                                        {"batch_size", std::to_string(o.batch_size)},
                                        {"sampling", o.sampling},     {"seed", std::to_string(o.seed)}};
  if (o.optimizer == "sgd") {
    char m[64];
    std::snprintf(m, sizeof m, "%.17g", o.momentum);
    id["momentum"] = m;
  }
  return id;
}

// Rank 0's verdict, the same on every rank: "" or the error.
std::string bcast_verdict(const Env& env, std::string err) {
  int len = static_cast<int>(err.size());
  HDDP_MPI(MPI_Bcast(&len, 1, MPI_INT, 0, env.comm()));
  err.resize(len);
  if (len) HDDP_MPI(MPI_Bcast(err.data(), len, MPI_CHAR, 0, env.comm()));
  return err;
}

template <class T>
void bcast_array(T* data, int64_t n, MPI_Datatype type, MPI_Comm comm) {
  for (int64_t off = 0; off < n; off += int64_t(1) << 30)
    HDDP_MPI(MPI_Bcast(data + off, static_cast<int>(std::min<int64_t>(n - off, int64_t(1) << 30)), type, 0, comm));
}

bool file_exists(const std::string& path) {
  struct stat st{};
  return stat(path.c_str(), &st) == 0;
}

int run(Env& env, const Options& o) {
  const int rank = env.rank(), size = env.size();
  const int threads = resolve_threads(o);
  omp_set_num_threads(threads);
  if (!o.gemm.empty()) hddp::set_gemm_backend(hddp::parse_gemm_backend(o.gemm));
  for (const auto* in : {&o.inject_nan, &o.inject_throw})
    if (in->epoch >= 0 && in->rank >= size) {
      if (rank == 0)
        std::fprintf(stderr, "poly_train: error: --debug-%s: rank %d does not exist (%d rank(s))\n",
                     in == &o.inject_nan ? "inject-nan" : "throw", in->rank, size);
      return poly::kExitUsage;
    }

  // Placement (distributed/affinity.h): where every rank's threads run. Rank 0 warns about ranks that
  // take turns on the same cores (a step then runs hundreds of times slower), and prints the
  // whole report with --report-affinity.
  const std::vector<hddp::RankPlacement> placement = hddp::gather_placement(env.comm());
  if (rank == 0) {
    if (o.report_affinity)
      for (const hddp::RankPlacement& p : placement) std::printf("affinity: %s\n", hddp::describe(p, size).c_str());
    std::fflush(stdout);
    for (const std::string& w : hddp::placement_warnings(placement)) std::fprintf(stderr, "poly_train: warning: %s\n", w.c_str());
  }

  // Scalers to [-1, 1]: x fitted on linspace(-3, 10, 32), y on f of those points.
  const std::vector<double> xs = poly::linspace(poly::kXMin, poly::kXMax, poly::kEvalPoints);
  std::vector<double> fs(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) fs[i] = poly::target(o.function, xs[i]);
  hddp::MinMaxScaler xscale(-1, 1), yscale(-1, 1);
  xscale.fit(xs.data(), int64_t(xs.size()), 1);
  yscale.fit(fs.data(), int64_t(fs.size()), 1);

  // Model and optimizer; rank 0's initial parameters are broadcast by the reducer.
  const bool sharded = o.sampling == "sharded";
  const int64_t local = o.batch_size, global = sharded ? o.batch_size * size : o.batch_size;
  const int64_t kEvalChunk = 256;
  hddp::Rng init(o.seed, 0);
  const std::vector<hddp::LayerSpec> layers = build_layers(o.hidden);
  hddp::Sequential<float> model(layers, std::max(local, kEvalChunk), init);
  std::unique_ptr<hddp::Optimizer<float>> opt;
  if (o.optimizer == "adam") {
    hddp::AdamHyper h;
    h.lr = o.lr;
    opt = std::make_unique<hddp::Adam<float>>(model.num_params(), h);
  } else {
    hddp::SgdHyper h;
    h.lr = o.lr, h.momentum = o.momentum;
    opt = std::make_unique<hddp::SGD<float>>(model.num_params(), h);
  }

  // Checkpoint: rank 0 checks the file's directory and, with --resume, reads the checkpoint,
  // compares its run with this one and loads it into the model and optimizer. Every rank
  // learns the verdict; a bad checkpoint is only ever read, never written.
  const std::map<std::string, std::string> identity = run_identity(o, layers);
  std::vector<std::vector<float>> history(rank == 0 ? size : 0);  // rank 0: every rank's losses
  std::vector<hddp::Rng::State> rng_states;                        // rank 0, on resume
  int64_t start = 0;
  if (!o.checkpoint.empty()) {
    std::string err;
    if (rank == 0) {
      const size_t slash = o.checkpoint.find_last_of('/');
      const std::string dir = slash == std::string::npos ? "." : o.checkpoint.substr(0, slash + 1);
      const bool exists = file_exists(o.checkpoint);
      if (access(dir.c_str(), W_OK | X_OK) != 0)
        err = "--checkpoint: cannot write into directory '" + dir + "': " + std::strerror(errno);
      else if (exists && !o.resume)
        err = "--checkpoint: '" + o.checkpoint + "' exists; pass --resume to continue from it, or remove it to start over";
      else if (exists) {
        try {
          const hddp::Checkpoint c = hddp::read_checkpoint(o.checkpoint);
          const std::string diff = hddp::identity_diff(c.state, size, identity);
          if (!diff.empty())
            err = "--resume: '" + o.checkpoint + "' was written by a different run (" + diff +
                  "); use the same settings and rank count, or another --checkpoint file";
          else if (c.state.epoch > o.epochs)
            err = "--resume: '" + o.checkpoint + "' is at epoch " + std::to_string(c.state.epoch) + ", past --epochs " +
                  std::to_string(o.epochs) + " (--epochs is the total, not a number of extra epochs)";
          else {
            hddp::restore_checkpoint(c, o.checkpoint, model.arena(), *opt);
            start = c.state.epoch;
            rng_states = c.state.rng;
            for (int r = 0; r < size; ++r)
              history[r].assign(c.state.losses.begin() + r * start, c.state.losses.begin() + (r + 1) * start);
          }
        } catch (const hddp::Error& e) {
          err = "--resume: cannot use checkpoint: " + user_message(e.what());
        }
      }
    }
    err = bcast_verdict(env, err);
    if (!err.empty()) {  // every rank stops here, before any training
      if (rank == 0) std::fprintf(stderr, "poly_train: error: %s\n", err.c_str());
      return poly::kExitUsage;
    }
  }

  std::unique_ptr<hddp::Trace> trace = o.trace.empty() ? nullptr : std::make_unique<hddp::Trace>(rank);
  hddp::ReducerOptions ropt;
  ropt.bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.bucket_mb * 1048576.0));
  ropt.first_bucket_cap_bytes = std::max<int64_t>(4, int64_t(o.first_bucket_mb * 1048576.0));
  ropt.overlap = o.overlap;
  ropt.progress = hddp::parse_progress(o.progress);
  // --progress thread: on the core OpenMP leaves free, if any (OMP_PLACES=cores
  // OMP_PROC_BIND=close and OMP_NUM_THREADS below the rank's cores); else it shares the master's.
  ropt.progress_cpu = hddp::spare_progress_cpu();
  // Stall watchdog (--timeout): the reducer's buckets and the driver's collectives below wait
  // through it, so a rank that stops arriving ends the job with a message naming it.
  hddp::WatchdogOptions wopt;
  wopt.timeout_s = o.timeout, wopt.exit_code = poly::kExitStall;
  hddp::Watchdog watchdog(env.comm(), wopt);
  ropt.watchdog = &watchdog;
  if (o.bucket_mb_auto) {
    // Bucket auto-sizing (distributed/bucket_autosize.h): a few allreduces and a warm-up
    // forward/backward on a batch from its own stream (the training samples and parameters are
    // untouched); rank 0 decides, every rank builds the same buckets.
    hddp::Rng warm(o.seed, 1000 + uint64_t(rank));
    std::vector<float> wx(static_cast<size_t>(local)), wy(static_cast<size_t>(local));
    for (auto& v : wx) v = warm.uniform(-1.0f, 1.0f);
    for (auto& v : wy) v = warm.uniform(-0.9f, 0.9f);
    hddp::AutosizeOptions ao;
    ao.tune_first = o.first_bucket_mb_auto;
    ao.first_cap_bytes = ropt.first_bucket_cap_bytes;
    const hddp::AutosizeResult a = hddp::autosize_buckets(env.comm(), model, wx.data(), local, wy.data(), ao, ropt);
    ropt.bucket_cap_bytes = a.plan.cap_bytes;
    ropt.first_bucket_cap_bytes = a.plan.first_cap_bytes;
    if (rank == 0)
      std::printf("bucket caps: auto -> %s (first bucket %s), %zu buckets; predicted exposed communication %.3g ms "
                  "per step (allreduce fit: %.3g us + %.3g us/MiB, backward %.3g ms); measured in %.2f s\n",
                  hddp::format_bytes(a.plan.cap_bytes).c_str(), hddp::format_bytes(a.plan.first_cap_bytes).c_str(),
                  a.plan.num_buckets, 1e3 * a.plan.exposed, 1e6 * a.model.alpha,
                  1e6 * 1048576.0 * a.model.beta, 1e3 * a.profile.total, a.measure_seconds);
  }
  hddp::DistributedModel ddp(env.comm(), model, ropt, trace.get());  // broadcasts rank 0's parameters

  // Samples: per-rank, each rank its own stream (seed, 1 + rank); sharded, one global batch
  // from stream (seed, 1) on every rank, of which each takes its contiguous slice.
  hddp::Rng data(o.seed, sharded ? 1 : 1 + uint64_t(rank));
  const hddp::Shard shard = sharded ? hddp::shard_of(global, rank, size) : hddp::Shard{0, local};

  // Resuming: the rest of rank 0's state goes to every rank (the parameters went with the
  // reducer's broadcast).
  HDDP_MPI(MPI_Bcast(&start, 1, MPI_INT64_T, 0, env.comm()));
  if (start > 0) {
    for (const hddp::StateBuffer<float>& b : opt->state()) bcast_array(b.data, b.size, MPI_FLOAT, env.comm());
    int64_t steps = opt->steps();
    HDDP_MPI(MPI_Bcast(&steps, 1, MPI_INT64_T, 0, env.comm()));
    opt->set_steps(steps);
    std::vector<uint64_t> all(rank == 0 ? 4 * size_t(size) : 0);
    for (int r = 0; r < int(rng_states.size()); ++r) std::copy(rng_states[r].begin(), rng_states[r].end(), all.begin() + 4 * r);
    hddp::Rng::State mine{};
    HDDP_MPI(MPI_Scatter(all.data(), 4, MPI_UINT64_T, mine.data(), 4, MPI_UINT64_T, 0, env.comm()));
    data.set_state(mine);
  }

  std::printf("Running DDP on rank %d/%d.\n", rank, size);
  std::fflush(stdout);
  if (rank == 0 && !o.checkpoint.empty()) {
    if (start > 0)
      std::fprintf(stderr, "poly_train: resumed from '%s' at epoch %lld of %lld\n", o.checkpoint.c_str(),
                   (long long)start, (long long)o.epochs);
    else if (o.resume)
      std::fprintf(stderr, "poly_train: no checkpoint '%s' yet: starting from scratch\n", o.checkpoint.c_str());
  }

  // Local gradient check (before averaging, as each layer's gradients go to the reducer).
  ddp.set_check_finite(true);
  const int64_t nparams = model.num_params();
  auto param_at = [&](int64_t off) {
    const hddp::ParamView* v = hddp::view_containing(model.param_views(), off);
    return v ? v->name : std::string("?");
  };

  // Loss history on rank 0: [0, synced) of every rank is in `history`.
  std::vector<float> losses(o.epochs);
  int64_t synced = start;
  auto sync_losses = [&](int64_t upto) {
    const int n = static_cast<int>(upto - synced);
    std::vector<float> buf(rank == 0 ? size_t(n) * size : 0);
    MPI_Request req;
    HDDP_MPI(MPI_Igather(losses.data() + synced, n, MPI_FLOAT, buf.data(), n, MPI_FLOAT, 0, env.comm(), &req));
    watchdog.wait(&req, "the gather of the losses");
    if (rank == 0)
      for (int r = 0; r < size; ++r) history[r].insert(history[r].end(), buf.begin() + size_t(r) * n, buf.begin() + size_t(r + 1) * n);
    synced = upto;
  };
  // Writes the checkpoint of `done` epochs (collective). Every rank checks the parameters
  // and optimizer state (identical everywhere) first: non-finite state is never saved.
  int64_t saved_epoch = start;
  auto state_finite = [&] {
    if (!hddp::all_finite(nparams, model.params())) return false;
    for (const hddp::StateBuffer<float>& b : opt->state())
      if (!hddp::all_finite(b.size, b.data)) return false;
    return true;
  };
  auto write_checkpoint = [&](int64_t done) {
    sync_losses(done);
    std::vector<uint64_t> all(rank == 0 ? 4 * size_t(size) : 0);
    MPI_Request req;
    HDDP_MPI(MPI_Igather(data.state().data(), 4, MPI_UINT64_T, all.data(), 4, MPI_UINT64_T, 0, env.comm(), &req));
    watchdog.wait(&req, "the checkpoint's gather of the RNG states");
    if (rank == 0) {
      hddp::TrainState st;
      st.epoch = done, st.world_size = size, st.identity = identity;
      st.rng.resize(size);
      for (int r = 0; r < size; ++r) std::copy(all.begin() + 4 * r, all.begin() + 4 * r + 4, st.rng[r].begin());
      st.losses.reserve(size_t(size) * done);
      for (int r = 0; r < size; ++r) st.losses.insert(st.losses.end(), history[r].begin(), history[r].begin() + done);
      hddp::save_checkpoint(o.checkpoint, model.arena(), *opt, st);
    }
    // Every rank learns that the file is written (a stall report, from any rank, names the
    // checkpoint kept; a file system that hangs rank 0 here is a stall like any other).
    HDDP_MPI(MPI_Ibarrier(env.comm(), &req));
    watchdog.wait(&req, "rank 0's checkpoint write");
    saved_epoch = done;
  };
  auto kept_checkpoint = [&] {
    if (o.checkpoint.empty()) return std::string(" (no --checkpoint)");
    if (saved_epoch == start && !file_exists(o.checkpoint)) return std::string(" (no checkpoint written yet)");
    return "; the last checkpoint '" + o.checkpoint + "' (" + std::to_string(saved_epoch) + " epochs) is kept";
  };
  watchdog.set_note([&] {
    const std::string kept = kept_checkpoint();
    return kept + (kept.rfind("; ", 0) == 0 ? ": continue with --resume" : "");
  });

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

  std::vector<double> xg(global), yg(global);
  std::vector<float> x(local), y(local);
  PhaseTimes t;
  const auto t_start = Clock::now();
  int64_t local_bad = INT64_MAX;  // earliest epoch * size + rank with a non-finite loss or own gradient
  std::string local_reason;
  // The agreement: first at the first epoch (a signal may have come during start-up), then
  // at the agreed interval.
  int64_t next_check = start, last_check = start - 1;
  auto t_check = Clock::now();
  for (int64_t epoch = start; epoch < o.epochs; ++epoch) {
    const auto t0 = Clock::now();
    watchdog.set_epoch(epoch);
    for (int64_t i = 0; i < global; ++i) xg[i] = data.uniform<double>(poly::kXMin, poly::kXMax);
    for (int64_t i = 0; i < local; ++i) yg[i] = poly::target(o.function, xg[shard.begin + i]);
    xscale.transform(xg.data() + shard.begin, local, 1, xg.data() + shard.begin);
    yscale.transform(yg.data(), local, 1, yg.data());
    for (int64_t i = 0; i < local; ++i) x[i] = float(xg[shard.begin + i]), y[i] = float(yg[i]);
    if (epoch == o.inject_nan.epoch && rank == o.inject_nan.rank) x[0] = std::numeric_limits<float>::quiet_NaN();
    if (epoch == o.inject_throw.epoch && rank == o.inject_throw.rank)
      throw hddp::Error("injected failure (--debug-throw) at epoch " + std::to_string(epoch) + " on rank " +
                        std::to_string(rank));

    model.zero_grad();
    model.forward(x.data(), local);
    const float loss = model.loss(y.data());
    const auto t1 = Clock::now();
    ddp.backward(y.data());
    const auto t2 = Clock::now();

    // Faults: local checks every epoch; the collective agreement every --check-every epochs,
    // at every checkpoint, at the last epoch, and at once when the averaged gradients (the
    // same on every rank) are not finite.
    if (local_bad == INT64_MAX && (!std::isfinite(loss) || ddp.non_finite_at() >= 0)) {
      local_bad = epoch * size + rank;
      char why[200];
      if (!std::isfinite(loss)) std::snprintf(why, sizeof why, "loss = %g", double(loss));
      else std::snprintf(why, sizeof why, "gradient of '%s' not finite", param_at(ddp.non_finite_at()).c_str());
      local_reason = why;
    }
    const bool avg_bad = !hddp::all_finite(nparams, model.grads());
    const bool ckpt_now = o.checkpoint_every > 0 && (epoch + 1) % o.checkpoint_every == 0;
    int stop_sig = 0;
    if (avg_bad || ckpt_now || epoch == next_check || epoch + 1 == o.epochs) {
      // Each rank proposes the next interval (fixed, or about kCheckPeriod of its own recent
      // training time); everyone takes the smallest, so the next agreement is at the same
      // epoch everywhere.
      int64_t interval = o.check_every;
      if (interval == 0) {
        const double per_epoch = seconds(t_check, Clock::now()) / double(epoch - last_check);
        interval = per_epoch > 0 ? int64_t(std::clamp(kCheckPeriod / per_epoch, 1.0, double(kMaxCheckInterval)))
                                 : kMaxCheckInterval;
      }
      int64_t in[3] = {-int64_t(g_stop_signal.load(std::memory_order_relaxed)), local_bad, interval}, out[3];
      MPI_Request req;
      HDDP_MPI(MPI_Iallreduce(in, out, 3, MPI_INT64_T, MPI_MIN, env.comm(), &req));
      watchdog.wait(&req, "the ranks' agreement (signals, NaN)");
      next_check = epoch + out[2], last_check = epoch, t_check = Clock::now();
      stop_sig = int(-out[0]);
      if (out[1] != INT64_MAX || avg_bad) {
        if (local_bad != INT64_MAX)
          std::fprintf(stderr, "[rank %d] non-finite value at epoch %lld: %s\n", rank, (long long)(local_bad / size),
                       local_reason.c_str());
        if (rank == 0) {
          if (out[1] != INT64_MAX)
            std::fprintf(stderr,
                         "poly_train: error: NaN/Inf at epoch %lld on rank %lld (its loss or own gradients); "
                         "all ranks stopped before the optimizer step of epoch %lld%s\n",
                         (long long)(out[1] / size), (long long)(out[1] % size), (long long)epoch, kept_checkpoint().c_str());
          else
            std::fprintf(stderr,
                         "poly_train: error: NaN/Inf in the gradients averaged over the ranks at epoch %lld (every "
                         "rank's own loss and gradients were finite: the sum overflowed); all ranks stopped%s\n",
                         (long long)epoch, kept_checkpoint().c_str());
        }
        return stop_together(poly::kExitNonFinite);
      }
    }
    opt->step(model.params(), model.grads());
    const auto t3 = Clock::now();
    t.forward += seconds(t0, t1), t.backward += seconds(t1, t2), t.optimizer += seconds(t2, t3);
    if (trace) {
      trace->add("forward", "compute", t0, t1, 0);
      trace->add("backward", "compute", t1, t2, 0);
      trace->add("optimizer", "compute", t2, t3, 0);
    }
    losses[epoch] = loss;
    if (epoch % o.log_every == 0) {
      g_log.line("epoch %lld, loss = %.6g, rank %d/%d (%s).\n", (long long)epoch, double(loss), rank, size,
                 env.hostname().c_str());
      if (rank == 0 && epoch > start) {
        const double el = seconds(t_start, Clock::now()), per = el / double(epoch - start + 1);
        g_progress.line("progress: epoch %lld/%lld (%.0f%%), %.2f us/step, ETA %.1f s\n", (long long)epoch,
                        (long long)o.epochs, 100.0 * double(epoch) / double(o.epochs), per * 1e6,
                        per * double(o.epochs - epoch - 1));
      }
    }
    const bool last = epoch + 1 == o.epochs;
    if ((ckpt_now || stop_sig) && !last && !o.checkpoint.empty()) {
      if (!state_finite()) {
        if (rank == 0)
          std::fprintf(stderr, "poly_train: error: the parameters or optimizer state are not finite after epoch %lld; "
                               "all ranks stopped%s\n", (long long)epoch, kept_checkpoint().c_str());
        return stop_together(poly::kExitNonFinite);
      }
      write_checkpoint(epoch + 1);
    }
    if (stop_sig && !last) {
      if (rank == 0)
        std::fprintf(stderr, "poly_train: %s: all ranks stopped after %lld of %lld epochs; %s (exit code %d)\n",
                     signal_name(stop_sig), (long long)(epoch + 1), (long long)o.epochs,
                     o.checkpoint.empty() ? "no --checkpoint, so the progress is lost"
                                          : ("checkpoint '" + o.checkpoint + "' written: continue with --resume").c_str(),
                     poly::kExitStopped);
      return stop_together(poly::kExitStopped);
    }
  }
  t.total = seconds(t_start, Clock::now());
  g_log.flush(), g_progress.flush();
  sync_losses(o.epochs);
  if (!o.checkpoint.empty()) {  // the final checkpoint: a later --resume with more --epochs continues from here
    if (!state_finite()) {
      if (rank == 0)
        std::fprintf(stderr, "poly_train: error: the parameters or optimizer state are not finite at the end; "
                             "final checkpoint not written%s\n", kept_checkpoint().c_str());
      return stop_together(poly::kExitNonFinite);
    }
    write_checkpoint(o.epochs);
  }
  const int64_t trained = o.epochs - start;

  // Everything rank 0 reports: timings and trace events (the losses are in `history`).
  const hddp::ReducerStats& rs = ddp.reducer().stats();
  double mine[6] = {t.forward, t.backward, t.optimizer, t.total, rs.total.comm, rs.total.exposed};
  std::vector<double> all_times(rank == 0 ? 6 * size : 0);
  HDDP_MPI(MPI_Gather(mine, 6, MPI_DOUBLE, all_times.data(), 6, MPI_DOUBLE, 0, env.comm()));
  std::string events = trace ? trace->events_json() : std::string();
  int elen = static_cast<int>(events.size());
  std::vector<int> lens(size), displs(size);
  HDDP_MPI(MPI_Gather(&elen, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, env.comm()));
  std::string all_events;
  if (rank == 0) {
    for (int r = 0, off = 0; r < size; ++r) displs[r] = off, off += lens[r];
    all_events.resize(displs[size - 1] + lens[size - 1]);
  }
  HDDP_MPI(MPI_Gatherv(events.data(), elen, MPI_CHAR, all_events.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                       env.comm()));
  if (rank != 0) return 0;

  // Evaluation on the 32 points and on a dense grid around the training range, for the plot.
  auto evaluate = [&](const std::vector<double>& pts) {
    poly::Curve c{pts, std::vector<double>(pts.size()), std::vector<double>(pts.size())};
    std::vector<double> in(pts), out(pts.size());
    xscale.transform(pts.data(), int64_t(pts.size()), 1, in.data());
    std::vector<float> xf(kEvalChunk);
    for (size_t b = 0; b < pts.size(); b += kEvalChunk) {
      const int64_t n = std::min<int64_t>(kEvalChunk, int64_t(pts.size() - b));
      for (int64_t i = 0; i < n; ++i) xf[i] = float(in[b + i]);
      const float* yhat = model.forward(xf.data(), n);
      for (int64_t i = 0; i < n; ++i) out[b + i] = yhat[i];
    }
    yscale.inverse_transform(out.data(), int64_t(out.size()), 1, c.g.data());
    for (size_t i = 0; i < pts.size(); ++i) c.f[i] = poly::target(o.function, pts[i]);
    return c;
  };
  const poly::Curve eval = evaluate(xs);
  const poly::Curve dense = evaluate(poly::linspace(poly::kXMin - 2.0, poly::kXMax + 2.0, 261));
  double mean_err = 0, max_err = 0;
  for (size_t i = 0; i < eval.x.size(); ++i) {
    const double e = std::fabs(eval.f[i] - eval.g[i]);
    mean_err += e / double(eval.x.size()), max_err = std::max(max_err, e);
  }
  const std::string dir = o.out + "/";
  poly::write_eval_csv(dir + "eval.csv", eval);
  poly::write_loss_csv(dir + "loss.csv", history);
  if (trace) {  // one event list per rank, joined into one document
    std::vector<std::string> bodies(size);
    for (int r = 0; r < size; ++r) bodies[r] = all_events.substr(displs[r], lens[r]);
    poly::write_file(o.trace, hddp::Trace::document(bodies));
  }

  std::printf("training: %lld epochs in %.3f s (%.2f us/step), %d rank(s) x %d thread(s), gemm %s%s\n",
              (long long)trained, t.total, trained > 0 ? 1e6 * t.total / double(trained) : 0.0, size, threads,
              hddp::to_string(hddp::gemm_backend()),
              start > 0 ? (", resumed at epoch " + std::to_string(start)).c_str() : "");
  std::printf("evaluation: mean |f - g| = %.4g, max |f - g| = %.4g over %lld points; wrote %seval.csv, %sloss.csv\n",
              mean_err, max_err, (long long)poly::kEvalPoints, dir.c_str(), dir.c_str());
  if (o.stats) {
    std::printf("%-6s %12s %12s %12s %12s %12s %12s %9s\n", "rank", "forward_s", "backward_s", "optim_s", "total_s",
                "comm_s", "exposed_s", "overlap");
    for (int r = 0; r < size; ++r) {
      const double* m = &all_times[6 * r];
      std::printf("%-6d %12.6f %12.6f %12.6f %12.6f %12.6f %12.6f %8.1f%%\n", r, m[0], m[1], m[2], m[3], m[4], m[5],
                  m[4] > 0 ? 100.0 * (1.0 - m[5] / m[4]) : 0.0);
    }
    std::printf("buckets: %zu, %lld bytes of gradients per step, %s, progress %s\n", ddp.reducer().buckets().size(),
                (long long)rs.bytes_per_step, o.overlap ? "overlapped" : "blocking", o.progress.c_str());
    std::string where;
    for (const hddp::RankPlacement& p : placement)
      where += (where.empty() ? "" : "; ") + ("rank " + std::to_string(p.rank) + " on " + p.node + " CPUs " +
                                              hddp::cpu_list(p.thread_cpus()) + " (" + std::to_string(p.threads.size()) +
                                              (p.threads.size() == 1 ? " thread)" : " threads)"));
    std::printf("placement: %s\n", where.c_str());
  }
  if (o.plot) {
    if (!hddp::gnuplot::available()) {
      std::fprintf(stderr, "warning: gnuplot not found (HDDP_GNUPLOT or PATH); errors.pdf not drawn (the CSVs hold the results). "
                           "Install it (Debian: apt-get install gnuplot-nox) or pass --no-plot.\n");
    } else {
      poly::plot_errors(dir + "errors.pdf", dense, eval, o.epochs, poly::kXMin, poly::kXMax);
      std::printf("plot evaluation result to %serrors.pdf\n", dir.c_str());
    }
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Parse first (no MPI needed) so the thread level can follow --progress.
  Options opts;
  std::string usage_error;
  try {
    opts = poly::parse_options(argc - 1, argv + 1);
  } catch (const poly::UsageError& e) {
    usage_error = e.what();
  }
  // MPI lives in this outer scope, so the handler below runs while it is still initialised:
  // an exception that unwound past Env first would MPI_Finalize this rank, which waits for
  // the others, which wait for this rank in the reducer: a hang instead of an abort.
  std::unique_ptr<Env> env;
  try {
    env = std::make_unique<Env>(&argc, &argv, hddp::Reducer::required_thread_level(hddp::parse_progress(opts.progress)));
    if (usage_error.empty() && !opts.help) usage_error = check_out_dir(*env, opts.out);
    if (!usage_error.empty()) {  // every rank gets here with the same verdict: exit 2 together
      if (env->root()) std::fprintf(stderr, "poly_train: error: %s\nTry 'poly_train --help'.\n", usage_error.c_str());
      return poly::kExitUsage;
    }
    if (opts.help) {
      if (env->root()) std::fputs(poly::help_text("poly_train").c_str(), stdout);
      return poly::kExitOk;
    }
    install_stop_handlers();  // after MPI_Init, so nothing Open MPI installs can replace them
    const int rc = run(*env, opts);
    g_log.flush(), g_progress.flush();  // after a stop: what the launcher had not taken yet
    return rc;
  } catch (const std::exception& e) {
    hddp::mpi::abort_all(poly::kExitError, e.what());  // ends every rank: no rank waits forever for this one
  } catch (...) {
    hddp::mpi::abort_all(poly::kExitError, "unknown exception");
  }
}
