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

std::string one_of(const std::string& flag, const std::string& v, std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (v == a) return v;
    list += (list.empty() ? "" : ", ") + std::string(a);
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

}  // namespace

Options parse_options(int argc, const char* const* argv) {
  Options o;
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
    else if (arg == "--optimizer") o.optimizer = one_of(arg, val(), {"adam", "sgd"});
    else if (arg == "--momentum") o.momentum = to_double(arg, val());
    else if (arg == "--function") o.function = one_of(arg, val(), {"poly", "griewank"});
    else if (arg == "--hidden") o.hidden = to_widths(arg, val());
    else if (arg == "--seed") {
      const int64_t s = to_int(arg, val());
      if (s < 0) fail("--seed: must be >= 0, got " + std::to_string(s));
      o.seed = uint64_t(s);
    } else if (arg == "--sampling") o.sampling = one_of(arg, val(), {"per-rank", "sharded"});
    else if (arg == "--log-every") o.log_every = to_int(arg, val());
    else if (arg == "--out") o.out = val();
    else if (arg == "--plot") flag_only(), o.plot = true;
    else if (arg == "--no-plot") flag_only(), o.plot = false;
    else if (arg == "--bucket-mb") o.bucket_mb = to_double(arg, val());
    else if (arg == "--first-bucket-mb") o.first_bucket_mb = to_double(arg, val());
    else if (arg == "--no-overlap") flag_only(), o.overlap = false;
    else if (arg == "--progress") o.progress = one_of(arg, val(), {"test", "thread"});
    else if (arg == "--threads") o.threads = static_cast<int>(to_int(arg, val()));
    else if (arg == "--gemm") o.gemm = one_of(arg, val(), {"blocked", "openblas", "naive"});
    else if (arg == "--trace") o.trace = val();
    else if (arg == "--stats") flag_only(), o.stats = true;
    else fail("unknown option '" + arg + "'");
  }
  if (o.epochs <= 0) fail("--epochs: must be > 0, got " + std::to_string(o.epochs));
  if (o.batch_size <= 0 || o.batch_size > (int64_t(1) << 24))
    fail("--batch-size: must be in [1, 16777216], got " + std::to_string(o.batch_size));
  if (!(o.lr > 0)) fail("--lr: must be > 0");
  if (o.momentum < 0 || o.momentum >= 1) fail("--momentum: must be in [0, 1)");
  if (o.log_every <= 0) fail("--log-every: must be > 0, got " + std::to_string(o.log_every));
  if (!(o.bucket_mb > 0)) fail("--bucket-mb: must be > 0");
  if (!(o.first_bucket_mb > 0)) fail("--first-bucket-mb: must be > 0");
  if (o.threads < 0 || o.threads > 4096) fail("--threads: must be in [1, 4096] (0 = automatic)");
  if (o.out.empty()) fail("--out: must not be empty");
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
     << "  --optimizer NAME      adam | sgd                                       [" << d.optimizer << "]\n"
     << "  --momentum X          SGD momentum                                     [" << d.momentum << "]\n"
     << "  --function NAME       poly | griewank (1 + x^2/4000 - cos x)           [" << d.function << "]\n"
     << "  --hidden W[,W...]     hidden widths; tanh between hidden layers        [20]\n"
     << "  --seed N              seed of weights and samples                      [" << d.seed << "]\n"
     << "  --sampling MODE       per-rank: each rank draws its own batch (stream seed, rank);\n"
     << "                        sharded: all draw one global batch of batch-size x P and each\n"
     << "                        takes its slice, so the result does not depend on P [" << d.sampling << "]\n"
     << "Output:\n"
     << "  --log-every N         loss line every N epochs                         [" << d.log_every << "]\n"
     << "  --out DIR             directory for errors.pdf, eval.csv, loss.csv     [" << d.out << "]\n"
     << "  --plot / --no-plot    draw errors.pdf with gnuplot                     [plot]\n"
     << "  --stats               print the reducer's timings and overlap at the end\n"
     << "  --trace FILE          write a Chrome-trace timeline (all ranks) to FILE\n"
     << "Parallelism:\n"
     << "  --threads N           OpenMP threads per rank [OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK,\n"
     << "                        else this node's cores divided among its ranks]\n"
     << "  --bucket-mb X         gradient bucket cap, MiB                         [" << d.bucket_mb << "]\n"
     << "  --first-bucket-mb X   first bucket cap, MiB                            [" << d.first_bucket_mb << "]\n"
     << "  --no-overlap          blocking MPI_Allreduce after backward instead of overlapping\n"
     << "  --progress MODE       test: MPI_Test from the compute thread; thread: a progress thread\n"
     << "                                                                         [" << d.progress << "]\n"
     << "  --gemm NAME           blocked | openblas | naive                       [HDDP_GEMM or blocked]\n"
     << "  --help                this text\n"
     << "\n"
     << "Exit codes: 0 done, 1 runtime error (all ranks stopped), 2 bad command line.\n";
  return os.str();
}

}  // namespace poly
