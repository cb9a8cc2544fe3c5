#include "poly_train/options.h"

#include "common/options.h"

namespace poly {
namespace {

using hddp::cli::integer, hddp::cli::number_where, hddp::cli::positive, hddp::cli::non_empty, hddp::cli::or_auto;

// The names of `values` (their to_string) for hddp::cli::one_of: one spelling, kept by the enum.
template <class E>
std::vector<std::pair<std::string, E>> named(std::initializer_list<E> values) {
  std::vector<std::pair<std::string, E>> v;
  for (E e : values) v.emplace_back(to_string(e), e);
  return v;
}
template <class E>
CLI::Validator one_of(std::initializer_list<E> values) { return hddp::cli::one_of(named(values)); }

// EPOCH[:RANK], both >= 0 (RANK defaults to 0), as --debug-inject-nan / --debug-throw take it.
CLI::Validator inject_spec() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        const size_t colon = v.find(':');
        std::string epoch = v.substr(0, colon), err = integer(0, kMaxEpochs)(epoch);
        if (!err.empty()) return "epoch: " + err;
        if (colon == std::string::npos) return "";
        std::string rank = v.substr(colon + 1);
        err = integer(0, int64_t(1) << 20)(rank);
        return err.empty() ? "" : "rank: " + err;
      },
      "");
}
Options::Inject to_inject(const std::string& v) {
  const size_t colon = v.find(':');
  return {std::stoll(v.substr(0, colon)), colon == std::string::npos ? 0 : std::stoi(v.substr(colon + 1))};
}

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

// Every option of poly_train: one CLI11 call each, its check beside it. Checks that involve
// several options are in parse_options.
void define_options(CLI::App& app, Options& o) {
  using hddp::GemmBackend, hddp::ReduceMode;
  const Options d;
  std::string desc(kDescription);
  desc.replace(desc.find("%s"), 2, app.get_name());
  hddp::cli::house_style(app, desc, kFooter, 33, o.help,
                         "read options from FILE (TOML/INI, `key = value`, keys the long\n"
                         "options without dashes); the command line overrides it");

  std::string g = "Training";
  app.add_option("--epochs", o.epochs, "epochs (one step each)")->check(integer(1, kMaxEpochs))->type_name("N")->group(g);
  app.add_option("--batch-size", o.batch_size, "samples per rank per epoch")
      ->check(integer(1, int64_t(1) << 24))->type_name("N")->group(g);
  app.add_option("--lr", o.lr, "learning rate")->check(positive())->type_name("X")->group(g);
  app.add_option("--optimizer", o.optimizer, "adam | sgd")
      ->transform(one_of({OptimizerKind::Adam, OptimizerKind::Sgd}))->default_str(to_string(d.optimizer))->type_name("NAME")->group(g);
  app.add_option("--momentum", o.momentum, "SGD momentum")
      ->check(number_where([](double x) { return x >= 0 && x < 1; }, "in [0, 1)"))->type_name("X")->group(g);
  app.add_option("--function", o.function, "poly | griewank (1 + x^2/4000 - cos x)")
      ->transform(one_of({Function::Poly, Function::Griewank}))->default_str(to_string(d.function))->type_name("NAME")->group(g);
  // In a config file also a TOML array (hidden = [64, 64]).
  app.add_option("--hidden", o.hidden, "hidden widths; tanh between hidden layers")
      ->delimiter(',')->check(integer(1, int64_t(1) << 16))->default_str("20")->type_name("W[,W...]")->group(g);
  app.add_option("--seed", o.seed, "seed of weights and samples")
      ->check(integer(0, INT64_MAX))->type_name("N")->group(g);
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

  g = "Parallelism";
  app.add_option("--threads", o.threads, "OpenMP threads per rank; 0: OMP_NUM_THREADS, else\n"
                                         "SLURM_CPUS_PER_TASK, else this node's cores divided among its ranks")
      ->check(integer(0, 4096))->type_name("N")->group(g);
  app.add_option("--bucket-mb", o.bucket_mb, "gradient bucket cap, MiB, or auto: chosen at start to minimise the\n"
                                              "predicted exposed communication, from an allreduce timing fit\n"
                                              "(alpha + beta bytes) and the backward time per layer of a warm-up\n"
                                              "step; rank 0 prints the caps. They come from a measurement, so a\n"
                                              "resumed run may not be bitwise the one it continues")
      ->transform(or_auto(positive()))->default_str("25")->type_name("X|auto")->group(g);
  app.add_option("--first-bucket-mb", o.first_bucket_mb, "first bucket cap, MiB, or auto (with --bucket-mb auto)")
      ->transform(or_auto(positive()))->default_str("1")->type_name("X|auto")->group(g);
  app.add_option("--reduce-mode", o.mode, "how gradient buckets are reduced: blocking (one MPI_Allreduce per\n"
                                          "bucket after backward), test (MPI_Iallreduce during backward,\n"
                                          "progressed by MPI_Test from the compute thread) or thread (the same,\n"
                                          "progressed by a helper thread)")
      ->transform(one_of({ReduceMode::Blocking, ReduceMode::Test, ReduceMode::Thread}))
      ->default_str(hddp::to_string(d.mode))->type_name("MODE")->group(g);
  app.add_option("--gemm", o.gemm, "blocked | openblas | naive [HDDP_GEMM or blocked]")
      ->transform(one_of({GemmBackend::Blocked, GemmBackend::OpenBLAS, GemmBackend::Naive}))->default_str("")->type_name("NAME")->group(g);

  g = "Checkpoints and faults";
  app.add_option("--checkpoint", o.checkpoint, "write a checkpoint (parameters, optimizer state, every rank's sampling\n"
                                               "RNG, epoch, loss history) to FILE atomically at the end, every\n"
                                               "--checkpoint-every epochs, and on SIGTERM/SIGUSR1. An existing FILE\n"
                                               "is never replaced without --resume")
      ->check(non_empty())->type_name("FILE")->group(g);
  app.add_option("--checkpoint-every", o.checkpoint_every, "also every N epochs (0: only at the end and on a signal)")
      ->check(integer(0, INT64_MAX))->type_name("N")->group(g);
  app.add_flag("--resume", o.resume, "continue from --checkpoint FILE up to --epochs (a total); start from\n"
                                     "scratch if FILE does not exist yet. Bitwise the run that was\n"
                                     "interrupted; a checkpoint of another run (rank count, layers,\n"
                                     "optimizer, lr, batch size, sampling, function, seed) is refused")->group(g);
  app.add_option("--check-every", o.check_every, "the ranks agree on signals and NaN/Inf every N epochs\n"
                                                 "(0: about every 5 ms of training)")
      ->check(integer(0, kMaxEpochs))->type_name("N")->group(g);
  // Below a second, a roll call's grace (min(5 s, timeout)) would be shorter than a busy
  // machine's scheduling delays, and a healthy job could be taken for a stalled one.
  app.add_option("--timeout", o.timeout, "stall watchdog: when a collective of a step (a bucket allreduce, the\n"
                                         "ranks' agreement, a checkpoint gather) has waited this long, the\n"
                                         "waiting ranks name the ranks that did not arrive (rank, node, epoch,\n"
                                         "bucket) and the job ends with exit code 4; the last checkpoint is\n"
                                         "kept. 0 turns it off, else 1 to 10000000. With it, --reduce-mode\n"
                                         "blocking runs each bucket as MPI_Iallreduce (libnbc's rabenseifner)\n"
                                         "instead of MPI_Allreduce: with 3+ ranks the sums may round\n"
                                         "differently than with --timeout 0")
      ->check(number_where([](double x) { return x == 0 || (x >= 1 && x <= 1e7); }, "0 (off) or in [1, 10000000]"))->type_name("SECONDS")->group(g);

  g = "Debugging (tests)";
  app.add_option_function<std::string>("--debug-inject-nan", [&o](const std::string& v) { o.inject_nan = to_inject(v); },
                                       "rank RANK (default 0) sees a NaN input at epoch EPOCH")
      ->check(inject_spec())->type_name("EPOCH[:RANK]")->group(g);
  app.add_option_function<std::string>("--debug-throw", [&o](const std::string& v) { o.inject_throw = to_inject(v); },
                                       "rank RANK throws at epoch EPOCH (its message, then MPI_Abort)")
      ->check(inject_spec())->type_name("EPOCH[:RANK]")->group(g);
  app.add_option("--debug-save-batch", o.save_batch, "rank 0 writes its first batch (scaled x,y) to FILE as CSV")
      ->check(non_empty())->type_name("FILE")->group(g);
}

}  // namespace

const char* to_string(OptimizerKind k) { return k == OptimizerKind::Sgd ? "sgd" : "adam"; }
const char* to_string(Sampling s) { return s == Sampling::Sharded ? "sharded" : "per-rank"; }

Options parse_options(int argc, const char* const* argv) {
  Options o;
  CLI::App app("", "poly_train");
  define_options(app, o);
  o.source_hash = hddp::cli::parse(app, argc, argv, {{"--no-overlap", "--reduce-mode blocking"},
                                                     {"--progress", "--reduce-mode test|thread"}});
  auto fail = [](const std::string& m) { throw UsageError(m); };
  if (!o.first_bucket_mb && o.bucket_mb) fail("--first-bucket-mb auto: needs --bucket-mb auto");
  if (o.checkpoint_every > 0 && o.checkpoint.empty()) fail("--checkpoint-every: needs --checkpoint FILE");
  if (o.resume && o.checkpoint.empty()) fail("--resume: needs --checkpoint FILE (the file to continue from)");
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
