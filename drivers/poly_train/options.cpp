#include "poly_train/options.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>

#include "core/util.h"

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

std::string non_empty(const std::string& flag, const std::string& v) {
  if (v.empty()) fail(flag + ": must not be empty");
  return v;
}

std::string num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// CLI11's layout with the usage line first (it is the first line of the description), and
// one blank line, not two, between groups of options.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override { return "\n"; }
  std::string make_group(std::string group, bool positional, std::vector<const CLI::Option*> opts) const override {
    return CLI::Formatter::make_group(std::move(group), positional, std::move(opts)).substr(1);
  }
};

const char* const kDescription =
    "Usage: [mpiexec -n P] %s [options]\n"
    "\n"
    "Data-parallel fit of f(x) = (x^3 + (x-10)^4) / (x-20)^2 on x in [-3, 10] (the PyTorch DDP\n"
    "tutorial, in C++): Linear(1, 20) -> Linear(20, 1, no bias) -> tanh, MinMax scaling to [-1, 1],\n"
    "fresh uniform samples every epoch, gradients averaged over the MPI ranks. Rank 0 writes\n"
    "errors.pdf (fit and absolute error), eval.csv and loss.csv into --out. Defaults are shown\n"
    "after '='. Options can also come from --config FILE (TOML or INI): one `key = value` per line,\n"
    "keys the long options without the dashes (epochs = 200, hidden = \"64,64\", no-plot = true);\n"
    "the command line overrides the file, and an unknown key is an error.";

const char* const kFooter =
    "SIGTERM or SIGUSR1: every rank finishes its step, the ranks agree on the epoch, rank 0\n"
    "writes the checkpoint, all exit with 75. (mpiexec forwards SIGUSR1 to the ranks. On\n"
    "SIGTERM it sends them SIGCONT, waits odls_base_sigkill_timeout seconds, sends SIGTERM,\n"
    "waits as long again, SIGKILLs them and exits 1 itself: Open MPI's default of 1 s can be\n"
    "too short to checkpoint on a busy node, so launch with\n"
    "OMPI_MCA_odls_base_sigkill_timeout=10, as scripts/run.sh and slurm/run.sbatch do.)\n"
    "NaN or Inf in a rank's loss or gradients: all ranks stop with the epoch and rank, the\n"
    "last checkpoint is kept, exit 3.\n"
    "\n"
    "Epochs are counted from 0 in messages and loss lines (loss.csv counts from 1).\n"
    "Exit codes: 0 done; 1 runtime error (the failing rank's message, then MPI_Abort ends all\n"
    "ranks); 2 bad command line or unusable checkpoint (nothing trained, nothing written);\n"
    "3 NaN/Inf in the loss or gradients; 4 stall (--timeout: a rank did not arrive); 75 stopped\n"
    "by SIGTERM/SIGUSR1 after writing the checkpoint (EX_TEMPFAIL: resume later;\n"
    "slurm/run.sbatch requeues itself).";

// Every option of poly_train as a CLI::App that fills `o` (and `no_overlap`). A value option's
// callback converts and checks its value with the functions above, as it is parsed (so a
// later flag wins over an earlier one, --progress and --reduce-mode included); the checks
// that involve several options are in parse_options.
struct Cli {
  Options o;
  bool no_overlap = false;  // --reduce-mode blocking, whatever --progress says
  CLI::App app;

  explicit Cli(const char* prog) {
    using hddp::GemmBackend, hddp::ReduceMode;
    std::string desc(kDescription);
    desc.replace(desc.find("%s"), 2, prog);
    app.description(desc);
    app.name(prog);
    app.footer(kFooter);
    app.formatter(std::make_shared<Formatter>());
    app.get_formatter()->column_width(33);
    app.get_formatter()->label("OPTIONS", "options");
    app.set_help_flag();  // --help is an ordinary flag (o.help): the driver prints help_text on rank 0
    app.allow_extras(true);  // reported by parse_options in its own words
    app.allow_config_extras(CLI::config_extras_mode::error);
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    const Options d;

    // A value option: `set` receives the flag's name and its value.
    const auto value = [&](const std::string& group, const std::string& name, const std::string& type,
                           const std::string& dflt, const std::string& help,
                           std::function<void(const std::string&, const std::string&)> set) {
      CLI::Option* opt = app.add_option_function<std::string>(
          name, [name, set](const std::string& v) { set(name, v); }, help);
      opt->type_name(type)->default_str(dflt)->trigger_on_parse()->group(group);
      return opt;
    };
    const auto flag = [&](const std::string& group, const std::string& names, bool& target, const std::string& help) {
      app.add_flag(names, target, help)->group(group);
    };

    app.set_config("--config", "", "read options from FILE (TOML/INI, `key = value`, keys the long\n"
                                  "options without dashes); the command line overrides it")
        ->type_name("FILE")
        ->group("Command line");
    flag("Command line", "--help", o.help, "this text");

    std::string g = "Training";
    value(g, "--epochs", "N", std::to_string(d.epochs), "epochs (one step each)",
          [this](auto& f, auto& v) { o.epochs = to_int(f, v); });
    value(g, "--batch-size", "N", std::to_string(d.batch_size), "samples per rank per epoch",
          [this](auto& f, auto& v) { o.batch_size = to_int(f, v); });
    value(g, "--lr", "X", num(d.lr), "learning rate", [this](auto& f, auto& v) { o.lr = to_double(f, v); });
    value(g, "--optimizer", "NAME", to_string(d.optimizer), "adam | sgd", [this](auto& f, auto& v) {
      o.optimizer = one_of(f, v, {OptimizerKind::Adam, OptimizerKind::Sgd});
    });
    value(g, "--momentum", "X", num(d.momentum), "SGD momentum",
          [this](auto& f, auto& v) { o.momentum = to_double(f, v); });
    value(g, "--function", "NAME", to_string(d.function), "poly | griewank (1 + x^2/4000 - cos x)",
          [this](auto& f, auto& v) { o.function = one_of(f, v, {Function::Poly, Function::Griewank}); });
    // In a config file also a TOML array (hidden = [64, 64]): its items arrive joined by '\n'.
    value(g, "--hidden", "W[,W...]", "20", "hidden widths; tanh between hidden layers", [this](auto& f, auto& v) {
      std::string list = v;
      for (char& c : list) c = c == '\n' ? ',' : c;
      o.hidden = to_widths(f, list);
    })->multi_option_policy(CLI::MultiOptionPolicy::Join);
    value(g, "--seed", "N", std::to_string(d.seed), "seed of weights and samples", [this](auto& f, auto& v) {
      const int64_t s = to_int(f, v);
      if (s < 0) fail(f + ": must be >= 0, got " + std::to_string(s));
      o.seed = uint64_t(s);
    });
    value(g, "--sampling", "MODE", to_string(d.sampling),
          "per-rank: each rank draws its own batch (stream seed, rank);\n"
          "sharded: all draw one global batch of batch-size x P and each\n"
          "takes its slice, so the result does not depend on P",
          [this](auto& f, auto& v) { o.sampling = one_of(f, v, {Sampling::PerRank, Sampling::Sharded}); });

    g = "Output";
    value(g, "--log-every", "N", std::to_string(d.log_every), "loss line every N epochs",
          [this](auto& f, auto& v) { o.log_every = to_int(f, v); });
    value(g, "--out", "DIR", d.out, "directory for errors.pdf, eval.csv, loss.csv",
          [this](auto&, auto& v) { o.out = v; });
    flag(g, "--plot,!--no-plot", o.plot, "draw errors.pdf with gnuplot (--no-plot: do not) [plot]");
    flag(g, "--stats", o.stats, "print the reducer's timings, overlap and placement at the end");
    flag(g, "--report-affinity", o.report_affinity,
         "print, at start, where every rank runs: host, Slurm node, the CPUs\n"
         "it may use and the CPU of each OpenMP thread. (Whether or not it\n"
         "is given, rank 0 warns when ranks on one host are pinned to the\n"
         "same cores, or a rank has more threads than CPUs.)");
    value(g, "--stats-json", "FILE", "",
          "JSON lines: one object per loss line (epoch, loss, time per step),\n"
          "then a summary (per-rank timings, reducer, placement, evaluation)",
          [this](auto& f, auto& v) { o.stats_json = non_empty(f, v); });
    value(g, "--trace", "FILE", "", "write a Chrome-trace timeline (all ranks) to FILE",
          [this](auto& f, auto& v) { o.trace = non_empty(f, v); });
    value(g, "--export", "FILE", "",
          "write the trained weights to FILE in safetensors format, named as\n"
          "PyTorch names the same nn.Sequential (0.weight, 0.bias, 1.weight);\n"
          "the scalers' ranges and the layers in its __metadata__",
          [this](auto& f, auto& v) { o.export_path = non_empty(f, v); });
    value(g, "--init", "FILE", "",
          "start from the weights in FILE (safetensors: from --export, or saved\n"
          "from PyTorch) instead of the seed's; every name, shape and dtype\n"
          "must match the model (--hidden)",
          [this](auto& f, auto& v) { o.init = non_empty(f, v); });

    g = "Parallelism";
    value(g, "--threads", "N", "",
          "OpenMP threads per rank [OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK,\n"
          "else this node's cores divided among its ranks]",
          [this](auto& f, auto& v) { o.threads = static_cast<int>(to_int(f, v)); });
    value(g, "--bucket-mb", "X|auto", num(d.bucket_mb),
          "gradient bucket cap, MiB, or auto: chosen at start to minimise the\n"
          "predicted exposed communication, from an allreduce timing fit\n"
          "(alpha + beta bytes) and the backward time per layer of a warm-up\n"
          "step; rank 0 prints the caps. They come from a measurement, so a\n"
          "resumed run may not be bitwise the one it continues",
          [this](auto& f, auto& v) { o.bucket_mb = cap_mb(f, v, o.bucket_mb_auto); });
    value(g, "--first-bucket-mb", "X|auto", num(d.first_bucket_mb), "first bucket cap, MiB, or auto (with --bucket-mb auto)",
          [this](auto& f, auto& v) { o.first_bucket_mb = cap_mb(f, v, o.first_bucket_mb_auto); });
    value(g, "--reduce-mode", "MODE", hddp::to_string(d.mode),
          "how gradient buckets are reduced: blocking (one MPI_Allreduce per\n"
          "bucket after backward), test (MPI_Iallreduce during backward,\n"
          "progressed by MPI_Test from the compute thread) or thread (the same,\n"
          "progressed by a helper thread)",
          [this](auto& f, auto& v) { o.mode = one_of(f, v, {ReduceMode::Blocking, ReduceMode::Test, ReduceMode::Thread}); });
    flag(g, "--no-overlap", no_overlap, "the same as --reduce-mode blocking (wins over --progress)");
    value(g, "--progress", "MODE", "", "the same as --reduce-mode MODE, for test | thread",
          [this](auto& f, auto& v) { o.mode = one_of(f, v, {ReduceMode::Test, ReduceMode::Thread}); });
    value(g, "--gemm", "NAME", "", "blocked | openblas | naive [HDDP_GEMM or blocked]", [this](auto& f, auto& v) {
      o.gemm = one_of(f, v, {GemmBackend::Blocked, GemmBackend::OpenBLAS, GemmBackend::Naive});
    });

    g = "Checkpoints and faults";
    value(g, "--checkpoint", "FILE", "",
          "write a checkpoint (parameters, optimizer state, every rank's sampling\n"
          "RNG, epoch, loss history) to FILE atomically at the end, every\n"
          "--checkpoint-every epochs, and on SIGTERM/SIGUSR1. An existing FILE\n"
          "is never replaced without --resume",
          [this](auto& f, auto& v) { o.checkpoint = non_empty(f, v); });
    value(g, "--checkpoint-every", "N", std::to_string(d.checkpoint_every),
          "also every N epochs (0: only at the end and on a signal)",
          [this](auto& f, auto& v) { o.checkpoint_every = to_int(f, v); });
    flag(g, "--resume", o.resume,
         "continue from --checkpoint FILE up to --epochs (a total); start from\n"
         "scratch if FILE does not exist yet. Bitwise the run that was\n"
         "interrupted; a checkpoint of another run (rank count, layers,\n"
         "optimizer, lr, batch size, sampling, function, seed) is refused");
    value(g, "--check-every", "N", std::to_string(d.check_every),
          "the ranks agree on signals and NaN/Inf every N epochs\n"
          "(0: about every 5 ms of training)",
          [this](auto& f, auto& v) { o.check_every = to_int(f, v); });
    value(g, "--timeout", "SECONDS", num(d.timeout),
          "stall watchdog: when a collective of a step (a bucket allreduce, the\n"
          "ranks' agreement, a checkpoint gather) has waited this long, the\n"
          "waiting ranks name the ranks that did not arrive (rank, node, epoch,\n"
          "bucket) and the job ends with exit code 4; the last checkpoint is\n"
          "kept. 0 turns it off. With it, --no-overlap runs each bucket as\n"
          "MPI_Iallreduce (libnbc's rabenseifner) instead of MPI_Allreduce:\n"
          "with 3+ ranks the sums may round differently than with --timeout 0",
          [this](auto& f, auto& v) { o.timeout = to_double(f, v); });

    g = "Debugging (tests)";
    value(g, "--debug-inject-nan", "EPOCH[:RANK]", "", "rank RANK (default 0) sees a NaN input at epoch EPOCH",
          [this](auto& f, auto& v) { o.inject_nan = to_inject(f, v); });
    value(g, "--debug-throw", "EPOCH[:RANK]", "", "rank RANK throws at epoch EPOCH (its message, then MPI_Abort)",
          [this](auto& f, auto& v) { o.inject_throw = to_inject(f, v); });
    value(g, "--debug-save-batch", "FILE", "", "rank 0 writes its first batch (scaled x,y) to FILE as CSV",
          [this](auto& f, auto& v) { o.save_batch = non_empty(f, v); });
  }

  // The command line as CLI11 is to see it. Two rules CLI11 does not have are checked here:
  // a flag takes no value (CLI11 would read --resume=0 as false), and "--name=" gives the
  // empty value (CLI11 would take the next argument). Every value option's "--name=VALUE" is
  // passed as "--name", "VALUE"; CLI11 takes the argument after a value option as its value
  // whatever it looks like (--out --x: the directory "--x"), as this loop assumes.
  std::vector<std::string> arguments(int argc, const char* const* argv) const {
    std::vector<std::string> args;
    for (int i = 0; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--") fail("unknown option '--'");  // not CLI11's end of options: there are no positionals
      const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
      const CLI::Option* opt = a.rfind("--", 0) == 0 ? app.get_option_no_throw(a.substr(0, eq)) : nullptr;
      if (!opt) {
        args.push_back(a);
        continue;
      }
      const std::string name = a.substr(0, eq);
      if (opt->get_expected_max() == 0) {
        if (eq != std::string::npos) fail(name + ": takes no value");
        args.push_back(a);
      } else if (eq != std::string::npos) {
        args.push_back(name), args.push_back(a.substr(eq + 1));
      } else {
        if (i + 1 >= argc) fail(name + ": missing value");
        args.push_back(a), args.push_back(argv[++i]);
      }
    }
    return args;
  }

  // The reducer mode when the command line gives it in any of its three spellings (last one
  // wins, --no-overlap over --progress as on the command line itself). CLI11 applies a config
  // file's entries for the options the command line did not name, so a file's `progress` would
  // otherwise override a command line's --reduce-mode.
  std::optional<hddp::ReduceMode> mode_on_command_line(const std::vector<std::string>& args) const {
    std::optional<hddp::ReduceMode> mode;
    bool blocking = false;
    for (size_t i = 0; i < args.size(); ++i) {
      const CLI::Option* opt = args[i].rfind("--", 0) == 0 ? app.get_option_no_throw(args[i]) : nullptr;
      if (!opt) continue;
      if (args[i] == "--no-overlap") blocking = true;
      if (opt->get_expected_max() == 0 || i + 1 >= args.size()) continue;
      if (args[i] == "--reduce-mode" || args[i] == "--progress") mode = hddp::parse_reduce_mode(args[i + 1]);
      ++i;  // the value
    }
    if (blocking) return hddp::ReduceMode::Blocking;
    return mode;
  }

  // FNV-1a of the arguments, to compare the ranks' command lines (Options::source_hash).
  static uint64_t source_hash(const std::vector<std::string>& args) {
    uint64_t h = hddp::fnv1a64(nullptr, 0);
    for (const std::string& a : args) h = hddp::fnv1a64(a.c_str(), a.size() + 1, h);
    return h;
  }
  // The --config file's bytes as this rank read them ("" without --config, or unreadable).
  std::string config_bytes() const {
    const CLI::Option* c = app.get_config_ptr();
    if (!c || c->count() == 0) return "";
    try {
      return hddp::read_file(c->as<std::string>());
    } catch (const std::exception&) {
      return "";
    }
  }
};

}  // namespace

const char* to_string(OptimizerKind k) { return k == OptimizerKind::Sgd ? "sgd" : "adam"; }
const char* to_string(Sampling s) { return s == Sampling::Sharded ? "sharded" : "per-rank"; }

Options parse_options(int argc, const char* const* argv) {
  using hddp::ReduceMode;
  Cli cli("poly_train");
  std::vector<std::string> args = cli.arguments(argc, argv);
  const std::vector<std::string> given = args;
  std::reverse(args.begin(), args.end());  // CLI11 takes them from the back
  try {
    cli.app.parse(args);
  } catch (const CLI::FileError&) {  // the only file CLI11 reads is --config's
    fail("--config: cannot read '" + cli.app.get_config_ptr()->as<std::string>() + "'");
  } catch (const CLI::ConfigError& e) {  // a key that is no option: "INI was not able to parse KEY"
    const std::string file = cli.app.get_config_ptr()->as<std::string>(), what = e.what();
    const std::string prefix = "INI was not able to parse ";
    if (what.rfind(prefix, 0) != 0) fail("--config " + file + ": " + what);
    const std::string key = what.substr(prefix.size());
    if (key.ends_with(".++")) fail("--config " + file + ": unknown section [" + key.substr(0, key.size() - 3) + "]");
    fail("--config " + file + ": unknown key '" + key + "'");
  } catch (const CLI::Error& e) {
    fail(e.what());
  }
  for (const std::string& r : cli.app.remaining()) {
    if (r.rfind("--", 0) == 0) fail("unknown option '" + r.substr(0, r.find('=')) + "'");
    fail("unexpected argument '" + r + "'");
  }
  Options o = cli.o;
  if (cli.no_overlap) o.mode = ReduceMode::Blocking;
  // The command line's mode over the file's, in any spelling (values checked by the parse).
  if (const std::optional<ReduceMode> m = cli.mode_on_command_line(given)) o.mode = *m;
  const std::string config = cli.config_bytes();
  o.source_hash = hddp::fnv1a64(config.data(), config.size(), Cli::source_hash(given));
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

std::string help_text(const char* prog) { return Cli(prog).app.help(); }

}  // namespace poly
