#include "poly_train/options.h"

#include <charconv>
#include <cmath>
#include <sstream>

namespace poly {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw UsageError(msg); }

int64_t to_int(const std::string& flag, const std::string& v) {
  int64_t x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    fail(flag + ": expected an integer, got '" + v + "'");
  return x;
}

double to_double(const std::string& flag, const std::string& v) {
  double x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty() || !std::isfinite(x))
    fail(flag + ": expected a number, got '" + v + "'");
  return x;
}

// A bucket cap in MiB, or "auto" (sets is_auto; the value stays the default).
double cap_mb(const std::string& flag, const std::string& v, bool& is_auto) {
  is_auto = v == "auto";
  if (is_auto) return flag == "--bucket-mb" ? Options{}.bucket_mb : Options{}.first_bucket_mb;
  double x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty() || !std::isfinite(x))
    fail(flag + ": expected a number or auto, got '" + v + "'");
  return x;
}

// The value of `allowed` whose name (to_string) is v; a usage error naming them otherwise.
template <class E>
E one_of(const std::string& flag, const std::string& v, std::initializer_list<E> allowed) {
  std::string list;
  for (E a : allowed) {
    if (v == to_string(a)) return a;
    list += (list.empty() ? "" : ", ") + std::string(to_string(a));
  }
  fail(flag + ": expected one of " + list + ", got '" + v + "'");
}

std::vector<int64_t> to_widths(const std::string& flag, const std::string& v) {
  std::vector<int64_t> w;
  std::stringstream ss(v);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const int64_t x = to_int(flag, item);
    if (x <= 0 || x > (int64_t(1) << 16)) fail(flag + ": layer widths must be in [1, 65536], got " + item);
    w.push_back(x);
  }
  if (w.empty() || v.back() == ',') fail(flag + ": expected a comma-separated list of widths such as 20 or 256,256");
  return w;
}

// EPOCH[:RANK], both >= 0 (RANK defaults to 0).
Options::Inject to_inject(const std::string& flag, const std::string& v) {
  Options::Inject in;
  const size_t colon = v.find(':');
  in.epoch = to_int(flag, v.substr(0, colon));
  if (colon != std::string::npos) {
    const int64_t r = to_int(flag, v.substr(colon + 1));
    if (r < 0 || r > (int64_t(1) << 20)) fail(flag + ": rank must be in [0, 1048576], got " + std::to_string(r));
    in.rank = int(r);
  }
  if (in.epoch < 0) fail(flag + ": epoch must be >= 0, got " + std::to_string(in.epoch));
  return in;
}

}  // namespace

const char* to_string(OptimizerKind k) { return k == OptimizerKind::Sgd ? "sgd" : "adam"; }
const char* to_string(Sampling s) { return s == Sampling::Sharded ? "sharded" : "per-rank"; }

Options parse_options(int argc, const char* const* argv) {
  using hddp::GemmBackend, hddp::ReduceMode;
  Options o;
  bool no_overlap = false;  // --reduce-mode blocking, whatever --progress says
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool has_value = false;
    if (arg.rfind("--", 0) != 0) fail("unexpected argument '" + arg + "'");
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1), arg = arg.substr(0, eq), has_value = true;
    }
    auto val = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) fail(arg + ": missing value");
      return argv[++i];
    };
    auto flag_only = [&] {
      if (has_value) fail(arg + ": takes no value");
    };
    if (arg == "--help") flag_only(), o.help = true;
    else if (arg == "--epochs") o.epochs = to_int(arg, val());
    else if (arg == "--batch-size") o.batch_size = to_int(arg, val());
    else if (arg == "--lr") o.lr = to_double(arg, val());
    else if (arg == "--optimizer") o.optimizer = one_of(arg, val(), {OptimizerKind::Adam, OptimizerKind::Sgd});
    else if (arg == "--momentum") o.momentum = to_double(arg, val());
    else if (arg == "--function") o.function = one_of(arg, val(), {Function::Poly, Function::Griewank});
    else if (arg == "--hidden") o.hidden = to_widths(arg, val());
    else if (arg == "--seed") {
      const int64_t s = to_int(arg, val());
      if (s < 0) fail("--seed: must be >= 0, got " + std::to_string(s));
      o.seed = uint64_t(s);
    } else if (arg == "--sampling") o.sampling = one_of(arg, val(), {Sampling::PerRank, Sampling::Sharded});
    else if (arg == "--log-every") o.log_every = to_int(arg, val());
    else if (arg == "--out") o.out = val();
    else if (arg == "--plot") flag_only(), o.plot = true;
    else if (arg == "--no-plot") flag_only(), o.plot = false;
    else if (arg == "--bucket-mb") o.bucket_mb = cap_mb(arg, val(), o.bucket_mb_auto);
    else if (arg == "--first-bucket-mb") o.first_bucket_mb = cap_mb(arg, val(), o.first_bucket_mb_auto);
    else if (arg == "--reduce-mode") o.mode = one_of(arg, val(), {ReduceMode::Blocking, ReduceMode::Test, ReduceMode::Thread});
    else if (arg == "--no-overlap") flag_only(), no_overlap = true;
    else if (arg == "--progress") o.mode = one_of(arg, val(), {ReduceMode::Test, ReduceMode::Thread});
    else if (arg == "--threads") o.threads = static_cast<int>(to_int(arg, val()));
    else if (arg == "--gemm") o.gemm = one_of(arg, val(), {GemmBackend::Blocked, GemmBackend::OpenBLAS, GemmBackend::Naive});
    else if (arg == "--trace") {
      o.trace = val();
      if (o.trace.empty()) fail("--trace: must not be empty");
    }
    else if (arg == "--stats") flag_only(), o.stats = true;
    else if (arg == "--stats-json") {
      o.stats_json = val();
      if (o.stats_json.empty()) fail("--stats-json: must not be empty");
    }
    else if (arg == "--report-affinity") flag_only(), o.report_affinity = true;
    else if (arg == "--checkpoint") {
      o.checkpoint = val();
      if (o.checkpoint.empty()) fail("--checkpoint: must not be empty");
    }
    else if (arg == "--checkpoint-every") o.checkpoint_every = to_int(arg, val());
    else if (arg == "--resume") flag_only(), o.resume = true;
    else if (arg == "--check-every") o.check_every = to_int(arg, val());
    else if (arg == "--timeout") o.timeout = to_double(arg, val());
    else if (arg == "--export") {
      o.export_path = val();
      if (o.export_path.empty()) fail("--export: must not be empty");
    } else if (arg == "--init") {
      o.init = val();
      if (o.init.empty()) fail("--init: must not be empty");
    } else if (arg == "--debug-save-batch") {
      o.save_batch = val();
      if (o.save_batch.empty()) fail("--debug-save-batch: must not be empty");
    }
    else if (arg == "--debug-inject-nan") o.inject_nan = to_inject(arg, val());
    else if (arg == "--debug-throw") o.inject_throw = to_inject(arg, val());
    else fail("unknown option '" + arg + "'");
  }
  if (no_overlap) o.mode = ReduceMode::Blocking;
  if (o.epochs <= 0 || o.epochs > kMaxEpochs)
    fail("--epochs: must be in [1, " + std::to_string(kMaxEpochs) + "], got " + std::to_string(o.epochs));
  if (o.batch_size <= 0 || o.batch_size > (int64_t(1) << 24))
    fail("--batch-size: must be in [1, 16777216], got " + std::to_string(o.batch_size));
  if (!(o.lr > 0)) fail("--lr: must be > 0");
  if (o.momentum < 0 || o.momentum >= 1) fail("--momentum: must be in [0, 1)");
  if (o.log_every <= 0) fail("--log-every: must be > 0, got " + std::to_string(o.log_every));
  if (!(o.bucket_mb > 0)) fail("--bucket-mb: must be > 0");
  if (!(o.first_bucket_mb > 0)) fail("--first-bucket-mb: must be > 0");
  if (o.first_bucket_mb_auto && !o.bucket_mb_auto) fail("--first-bucket-mb auto: needs --bucket-mb auto");
  if (o.threads < 0 || o.threads > 4096) fail("--threads: must be in [1, 4096] (0 = automatic)");
  if (o.out.empty()) fail("--out: must not be empty");
  if (o.checkpoint_every < 0) fail("--checkpoint-every: must be >= 0, got " + std::to_string(o.checkpoint_every));
  if (o.check_every < 0 || o.check_every > kMaxEpochs)
    fail("--check-every: must be in [0, " + std::to_string(kMaxEpochs) + "] (0 = automatic), got " + std::to_string(o.check_every));
  // Below a second, a roll call's grace (min(5 s, timeout)) would be shorter than a busy
  // machine's scheduling delays, and a healthy job could be taken for a stalled one.
  if (o.timeout != 0 && (o.timeout < 1 || o.timeout > 1e7))
    fail("--timeout: must be 0 (off) or in [1, 10000000] seconds");
  if (o.checkpoint_every > 0 && o.checkpoint.empty()) fail("--checkpoint-every: needs --checkpoint FILE");
  if (o.resume && o.checkpoint.empty()) fail("--resume: needs --checkpoint FILE (the file to continue from)");
  if (o.resume && !o.init.empty())
    fail("--init: not with --resume (a resumed run continues from its checkpoint's parameters)");
  return o;
}

std::string help_text(const char* prog) {
  Options d;
  std::ostringstream os;
  os << "Usage: [mpiexec -n P] " << prog << " [options]\n"
     << "\n"
     << "Data-parallel fit of f(x) = (x^3 + (x-10)^4) / (x-20)^2 on x in [-3, 10] (the PyTorch DDP\n"
     << "tutorial, in C++): Linear(1, 20) -> Linear(20, 1, no bias) -> tanh, MinMax scaling to [-1, 1],\n"
     << "fresh uniform samples every epoch, gradients averaged over the MPI ranks. Rank 0 writes\n"
     << "errors.pdf (fit and absolute error), eval.csv and loss.csv into --out.\n"
     << "\n"
     << "Training:\n"
     << "  --epochs N            epochs (one step each)                           [" << d.epochs << "]\n"
     << "  --batch-size N        samples per rank per epoch                       [" << d.batch_size << "]\n"
     << "  --lr X                learning rate                                    [" << d.lr << "]\n"
     << "  --optimizer NAME      adam | sgd                                       [" << to_string(d.optimizer) << "]\n"
     << "  --momentum X          SGD momentum                                     [" << d.momentum << "]\n"
     << "  --function NAME       poly | griewank (1 + x^2/4000 - cos x)           [" << to_string(d.function) << "]\n"
     << "  --hidden W[,W...]     hidden widths; tanh between hidden layers        [20]\n"
     << "  --seed N              seed of weights and samples                      [" << d.seed << "]\n"
     << "  --sampling MODE       per-rank: each rank draws its own batch (stream seed, rank);\n"
     << "                        sharded: all draw one global batch of batch-size x P and each\n"
     << "                        takes its slice, so the result does not depend on P [" << to_string(d.sampling) << "]\n"
     << "Output:\n"
     << "  --log-every N         loss line every N epochs                         [" << d.log_every << "]\n"
     << "  --out DIR             directory for errors.pdf, eval.csv, loss.csv     [" << d.out << "]\n"
     << "  --plot / --no-plot    draw errors.pdf with gnuplot                     [plot]\n"
     << "  --stats               print the reducer's timings, overlap and placement at the end\n"
     << "  --report-affinity     print, at start, where every rank runs: host, Slurm node, the CPUs\n"
     << "                        it may use and the CPU of each OpenMP thread. (Whether or not it\n"
     << "                        is given, rank 0 warns when ranks on one host are pinned to the\n"
     << "                        same cores, or a rank has more threads than CPUs.)\n"
     << "  --stats-json FILE     JSON lines: one object per loss line (epoch, loss, time per step),\n"
     << "                        then a summary (per-rank timings, reducer, placement, evaluation)\n"
     << "  --trace FILE          write a Chrome-trace timeline (all ranks) to FILE\n"
     << "  --export FILE         write the trained weights to FILE in safetensors format, named as\n"
     << "                        PyTorch names the same nn.Sequential (0.weight, 0.bias, 1.weight);\n"
     << "                        the scalers' ranges and the layers in its __metadata__\n"
     << "  --init FILE           start from the weights in FILE (safetensors: from --export, or saved\n"
     << "                        from PyTorch) instead of the seed's; every name, shape and dtype\n"
     << "                        must match the model (--hidden)\n"
     << "Parallelism:\n"
     << "  --threads N           OpenMP threads per rank [OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK,\n"
     << "                        else this node's cores divided among its ranks]\n"
     << "  --bucket-mb X         gradient bucket cap, MiB, or auto: chosen at start to minimise the\n"
     << "                        predicted exposed communication, from an allreduce timing fit\n"
     << "                        (alpha + beta bytes) and the backward time per layer of a warm-up\n"
     << "                        step; rank 0 prints the caps. They come from a measurement, so a\n"
     << "                        resumed run may not be bitwise the one it continues  [" << d.bucket_mb << "]\n"
     << "  --first-bucket-mb X   first bucket cap, MiB, or auto (with --bucket-mb auto) [" << d.first_bucket_mb << "]\n"
     << "  --reduce-mode MODE    how gradient buckets are reduced: blocking (one MPI_Allreduce per\n"
     << "                        bucket after backward), test (MPI_Iallreduce during backward,\n"
     << "                        progressed by MPI_Test from the compute thread) or thread (the same,\n"
     << "                        progressed by a helper thread)                   [" << hddp::to_string(d.mode) << "]\n"
     << "  --no-overlap          the same as --reduce-mode blocking (wins over --progress)\n"
     << "  --progress MODE       the same as --reduce-mode MODE, for test | thread\n"
     << "  --gemm NAME           blocked | openblas | naive                       [HDDP_GEMM or blocked]\n"
     << "  --help                this text\n"
     << "Checkpoints and faults:\n"
     << "  --checkpoint FILE     write a checkpoint (parameters, optimizer state, every rank's sampling\n"
     << "                        RNG, epoch, loss history) to FILE atomically at the end, every\n"
     << "                        --checkpoint-every epochs, and on SIGTERM/SIGUSR1. An existing FILE\n"
     << "                        is never replaced without --resume\n"
     << "  --checkpoint-every N  also every N epochs (0: only at the end and on a signal)   [0]\n"
     << "  --resume              continue from --checkpoint FILE up to --epochs (a total); start from\n"
     << "                        scratch if FILE does not exist yet. Bitwise the run that was\n"
     << "                        interrupted; a checkpoint of another run (rank count, layers,\n"
     << "                        optimizer, lr, batch size, sampling, function, seed) is refused\n"
     << "  --check-every N       the ranks agree on signals and NaN/Inf every N epochs\n"
     << "                        (0: about every 5 ms of training)                        [0]\n"
     << "  --timeout SECONDS     stall watchdog: when a collective of a step (a bucket allreduce, the\n"
     << "                        ranks' agreement, a checkpoint gather) has waited this long, the\n"
     << "                        waiting ranks name the ranks that did not arrive (rank, node, epoch,\n"
     << "                        bucket) and the job ends with exit code 4; the last checkpoint is\n"
     << "                        kept. 0 turns it off. With it, --no-overlap runs each bucket as\n"
     << "                        MPI_Iallreduce (libnbc's rabenseifner) instead of MPI_Allreduce:\n"
     << "                        with 3+ ranks the sums may round differently than with --timeout 0\n"
     << "                                                                         [" << d.timeout << "]\n"
     << "  SIGTERM or SIGUSR1: every rank finishes its step, the ranks agree on the epoch, rank 0\n"
     << "  writes the checkpoint, all exit with 75. (mpiexec forwards SIGUSR1 to the ranks. On\n"
     << "  SIGTERM it sends them SIGCONT, waits odls_base_sigkill_timeout seconds, sends SIGTERM,\n"
     << "  waits as long again, SIGKILLs them and exits 1 itself: Open MPI's default of 1 s can be\n"
     << "  too short to checkpoint on a busy node, so launch with\n"
     << "  OMPI_MCA_odls_base_sigkill_timeout=10, as scripts/run.sh and slurm/run.sbatch do.)\n"
     << "  NaN or Inf in a rank's loss or gradients: all ranks stop with the epoch and rank, the\n"
     << "  last checkpoint is kept, exit 3.\n"
     << "Debugging (tests):\n"
     << "  --debug-inject-nan EPOCH[:RANK]  rank RANK (default 0) sees a NaN input at epoch EPOCH\n"
     << "  --debug-throw EPOCH[:RANK]       rank RANK throws at epoch EPOCH (its message, then MPI_Abort)\n"
     << "  --debug-save-batch FILE          rank 0 writes its first batch (scaled x,y) to FILE as CSV\n"
     << "\n"
     << "Epochs are counted from 0 in messages and loss lines (loss.csv counts from 1).\n"
     << "Exit codes: 0 done; 1 runtime error (the failing rank's message, then MPI_Abort ends all\n"
     << "ranks); 2 bad command line or unusable checkpoint (nothing trained, nothing written);\n"
     << "3 NaN/Inf in the loss or gradients; 4 stall (--timeout: a rank did not arrive); 75 stopped\n"
     << "by SIGTERM/SIGUSR1 after writing the\n"
     << "checkpoint (EX_TEMPFAIL: resume later; slurm/run.sbatch requeues itself).\n";
  return os.str();
}

}  // namespace poly
