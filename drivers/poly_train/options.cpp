#include "poly_train/options.h"

#include <hddp/train/exit_code.h>

#include "common/options.h"

namespace poly {
namespace {

using hddp::cli::integer, hddp::cli::number_where, hddp::cli::positive, hddp::cli::non_empty, hddp::cli::or_auto;
using hddp::cli::inject_spec, hddp::cli::to_inject;

// The names of `values` (their to_string) for hddp::cli::one_of: one spelling, kept by the enum.
template <class E>
std::vector<std::pair<std::string, E>> named(std::initializer_list<E> values) {
  std::vector<std::pair<std::string, E>> v;
  for (E e : values) v.emplace_back(to_string(e), e);
  return v;
}
template <class E>
CLI::Validator one_of(std::initializer_list<E> values) { return hddp::cli::one_of(named(values)); }

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
    "Epochs are counted from 1 in messages and in loss.csv; the tutorial's own loss lines\n"
    "(\"epoch 900, loss = ...\") keep its count from 0.\n";

// Every option of poly_train: one CLI11 call each, its check beside it. Checks that involve
// several options are in parse_options.
void define_options(CLI::App& app, Options& o) {
  using hddp::GemmBackend;
  const Options d;
  std::string desc(kDescription);
  desc.replace(desc.find("%s"), 2, app.get_name());
  hddp::cli::house_style(app, desc, kFooter + hddp::exit_codes_help(), 33, o.help,
                         "read options from FILE (TOML/INI, `key = value`, keys the long\n"
                         "options without dashes); the command line overrides it");

  hddp::cli::add_training_options(app, o, kMaxEpochs, "samples per rank per epoch (one step)");
  std::string g = "Training";
  app.add_option("--function", o.function, "poly | griewank (1 + x^2/4000 - cos x)")
      ->transform(one_of({Function::Poly, Function::Griewank}))->default_str(to_string(d.function))->type_name("NAME")->group(g);
  // In a config file also a TOML array (hidden = [64, 64]).
  app.add_option("--hidden", o.hidden, "hidden widths; tanh between hidden layers")
      ->delimiter(',')->check(integer(1, int64_t(1) << 16))->default_str("20")->type_name("W[,W...]")->group(g);
  app.add_option("--sampling", o.sampling, "per-rank: each rank draws its own batch (stream seed, rank);\n"
                                           "sharded: all draw one global batch of batch-size x P and each\n"
                                           "takes its slice, so the result does not depend on P")
      ->transform(one_of({Sampling::PerRank, Sampling::Sharded}))->default_str(to_string(d.sampling))->type_name("MODE")->group(g);

  g = "Output";
  app.add_option("--log-every", o.log_every, "loss line every N epochs")->check(integer(1, INT64_MAX))->type_name("N")->group(g);
  app.add_option("--out", o.out, "directory for errors.pdf, eval.csv, loss.csv")->check(non_empty())->type_name("DIR")->group(g);
  app.add_flag("--plot,!--no-plot", o.plot, "draw errors.pdf with gnuplot (--no-plot: do not)")->group(g);
  app.add_flag("--stats", o.stats, "print the reducer's timings, overlap and placement at the end")->group(g);
  app.add_flag("--report-affinity", o.report_affinity,
               "print, at start, where every rank runs: host, Slurm node, the CPUs\n"
               "it may use and the CPU of each OpenMP thread. (Whether or not it\n"
               "is given, rank 0 warns when ranks on one host are pinned to the\n"
               "same cores, or a rank has more threads than CPUs.)")->group(g);
  app.add_option("--stats-json", o.stats_json, "JSON lines: one object per loss line (epoch, loss, time per step),\n"
                                                "then a summary (per-rank timings, reducer, placement, evaluation)")
      ->check(non_empty())->type_name("FILE")->group(g);
  app.add_option("--trace", o.trace, "write a Chrome-trace timeline (all ranks) to FILE")->check(non_empty())->type_name("FILE")->group(g);
  app.add_option("--export", o.export_path, "write the trained weights to FILE in safetensors format, named as\n"
                                             "PyTorch names the same nn.Sequential (0.weight, 0.bias, 1.weight);\n"
                                             "the scalers' ranges and the layers in its __metadata__")
      ->check(non_empty())->type_name("FILE")->group(g);
  app.add_option("--init", o.init, "start from the weights in FILE (safetensors: from --export, or saved\n"
                                   "from PyTorch) instead of the seed's; every name, shape and dtype\n"
                                   "must match the model (--hidden)")
      ->check(non_empty())->type_name("FILE")->group(g);

  hddp::cli::add_parallel_options(app, o);
  app.add_option("--gemm", o.gemm, "blocked | openblas | naive [HDDP_GEMM or blocked]")
      ->transform(one_of({GemmBackend::Blocked, GemmBackend::OpenBLAS, GemmBackend::Naive}))->default_str("")
      ->type_name("NAME")->group("Parallelism");
  hddp::cli::add_checkpoint_options(app, o, "parameters, optimizer state, every rank's sampling\n"
                                            "RNG, epoch, loss history");

  g = "Debugging (tests)";
  app.add_option_function<std::string>("--debug-inject-nan", [&o](const std::string& v) { o.inject_nan = to_inject(v); },
                                       "rank RANK (default 0) sees a NaN input at epoch EPOCH")
      ->check(inject_spec(kMaxEpochs))->type_name("EPOCH[:RANK]")->group(g);
  app.add_option_function<std::string>("--debug-throw", [&o](const std::string& v) { o.inject_throw = to_inject(v); },
                                       "rank RANK throws at epoch EPOCH (its message, then MPI_Abort)")
      ->check(inject_spec(kMaxEpochs))->type_name("EPOCH[:RANK]")->group(g);
  app.add_option("--debug-save-batch", o.save_batch, "rank 0 writes its first batch (scaled x,y) to FILE as CSV")
      ->check(non_empty())->type_name("FILE")->group(g);
}

}  // namespace

const char* to_string(Sampling s) { return s == Sampling::Sharded ? "sharded" : "per-rank"; }

Options parse_options(int argc, const char* const* argv) {
  Options o;
  CLI::App app("", "poly_train");
  define_options(app, o);
  o.source_hash = hddp::cli::parse(app, argc, argv, {{"--no-overlap", "--reduce-mode blocking"},
                                                     {"--progress", "--reduce-mode test|thread"}});
  auto fail = [](const std::string& m) { throw UsageError(m); };
  hddp::cli::check_options(app, o, o);
  if (o.resume && !o.init.empty()) fail("--init: not with --resume (a resumed run continues from its checkpoint's parameters)");
  return o;
}

std::string help_text(const char* prog) {
  Options o;
  CLI::App app("", prog);
  define_options(app, o);
  return app.help();
}

}  // namespace poly
