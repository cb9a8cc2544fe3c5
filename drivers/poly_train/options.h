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
#include "common/run_options.h"
#include <hddp/kernels/gemm.h>
#include "poly_train/problem.h"

namespace poly {

using hddp::cli::OptimizerKind;
enum class Sampling { PerRank, Sharded };
const char* to_string(Sampling s);       // "per-rank" | "sharded"

// Bad command-line input: the driver prints it with a pointer to --help and exits with 2.
using UsageError = hddp::cli::UsageError;

// --epochs at most this: per-rank loss counts stay MPI ints (and 4 GB of loss history).
inline constexpr int64_t kMaxEpochs = 1000000000;

// The shared groups (drivers/common/run_options.h) with the tutorial's defaults, and poly_train's
// own options. One step per epoch: a step is an epoch here.
struct Options : hddp::cli::TrainingOptions, hddp::cli::ParallelOptions, hddp::cli::CheckpointOptions {
  Options() {
    epochs = 1000, batch_size = 32, lr = 1e-3, momentum = 0.9, seed = 42;
  }
  Function function = Function::Poly;
  std::vector<int64_t> hidden = {20};  // hidden layer widths
  Sampling sampling = Sampling::PerRank;
  int64_t log_every = 100;
  std::string out = ".";
  bool plot = true;
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

  // Debugging (tests): make rank `rank` see a NaN input, or throw, at epoch `epoch` (1-based).
  using Inject = hddp::cli::Inject;
  Inject inject_nan, inject_throw;
  std::string save_batch;              // --debug-save-batch: rank 0's first batch as CSV (x,y scaled)
};

// Parses argv (without argv[0]); throws UsageError naming the flag on any bad input.
Options parse_options(int argc, const char* const* argv);

std::string help_text(const char* prog);

}  // namespace poly
