#pragma once
// poly_train's command line: every option, its default, and its validation (options.cpp, one
// CLI11 call per option through drivers/common/options.h). Options that name one of a set are
// enums; a name outside the set is a usage error.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <hddp/distributed/reducer.h>
#include "common/options.h"
#include <hddp/kernels/gemm.h>
#include "poly_train/problem.h"

namespace poly {

enum class OptimizerKind { Adam, Sgd };
enum class Sampling { PerRank, Sharded };
const char* to_string(OptimizerKind k);  // "adam" | "sgd"
const char* to_string(Sampling s);       // "per-rank" | "sharded"

// Bad command-line input: the driver prints it with a pointer to --help and exits with 2.
using UsageError = hddp::cli::UsageError;

// --epochs at most this: per-rank loss counts stay MPI ints (and 4 GB of loss history).
inline constexpr int64_t kMaxEpochs = 1000000000;

struct Options {
  int64_t epochs = 1000;
  int64_t batch_size = 32;             // per rank
  double lr = 1e-3;
  OptimizerKind optimizer = OptimizerKind::Adam;
  double momentum = 0.9;               // sgd only
  Function function = Function::Poly;
  std::vector<int64_t> hidden = {20};  // hidden layer widths
  uint64_t seed = 42;
  Sampling sampling = Sampling::PerRank;
  int64_t log_every = 100;
  std::string out = ".";
  bool plot = true;
  // Bucket caps in MiB; none: "auto", chosen at start (distributed/bucket_autosize.h).
  std::optional<double> bucket_mb = 25, first_bucket_mb = 1;
  hddp::ReduceMode mode = hddp::ReduceMode::Test;
  int threads = 0;                     // 0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else cores
  std::optional<hddp::GemmBackend> gemm;  // none: HDDP_GEMM or blocked
  std::string trace;                   // Chrome-trace JSON path ("" = off)
  bool stats = false;
  std::string stats_json;              // machine-readable statistics file ("" = off)
  bool report_affinity = false;        // print every rank's placement at start (distributed/affinity.h)
  std::string export_path;             // --export: the trained weights as safetensors ("" = off)
  std::string init;                    // --init: start from these safetensors weights ("" = seed's)
  bool help = false;
  // FNV-1a of the arguments and the --config file's bytes (hddp::cli::parse): the same on every
  // rank of one job, which main checks (a file one node reads differently must not split the ranks).
  uint64_t source_hash = 0;

  // Faults: checkpoint/resume, signals, non-finite values (README "Faults"; --help).
  std::string checkpoint;              // checkpoint file ("" = none)
  int64_t checkpoint_every = 0;        // epochs between checkpoints (0: only at the end and on a signal)
  bool resume = false;                 // continue from --checkpoint when it exists
  int64_t check_every = 0;             // epochs between the ranks' agreement on signals / NaN (0: ~5 ms)
  double timeout = 300;                // stall watchdog (distributed/watchdog.h): seconds a collective may wait; 0: off

  // Debugging (tests): make rank `rank` see a NaN input, or throw, at epoch `epoch` (0-based).
  struct Inject {
    int64_t epoch = -1;                // -1: off
    int rank = 0;
  };
  Inject inject_nan, inject_throw;
  std::string save_batch;              // --debug-save-batch: rank 0's first batch as CSV (x,y scaled)
};

// Exit codes of poly_train (also in --help and the README).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;        // runtime error: the failing rank's message, then MPI_Abort
inline constexpr int kExitUsage = 2;        // bad command line, or a checkpoint that cannot be used
inline constexpr int kExitNonFinite = 3;    // NaN/Inf in a loss or the gradients: all ranks stopped
inline constexpr int kExitStall = 4;        // a collective waited longer than --timeout: the waiting
                                            // ranks name the ranks that did not arrive, MPI_Abort
inline constexpr int kExitStopped = 75;     // SIGTERM/SIGUSR1: checkpoint written, resume later
                                            // (EX_TEMPFAIL; slurm/run.sbatch requeues the job)

// Parses argv (without argv[0]); throws UsageError naming the flag on any bad input.
Options parse_options(int argc, const char* const* argv);

std::string help_text(const char* prog);

}  // namespace poly
