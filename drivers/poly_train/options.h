#pragma once
// poly_train's command line: every option, its default, and its validation.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace poly {

// Bad command-line input: the driver prints it with a pointer to --help and exits with 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Options {
  int64_t epochs = 1000;
  int64_t batch_size = 32;             // per rank
  double lr = 1e-3;
  std::string optimizer = "adam";      // adam | sgd
  double momentum = 0.9;               // sgd only
  std::string function = "poly";       // poly | griewank
  std::vector<int64_t> hidden = {20};  // hidden layer widths
  uint64_t seed = 42;
  std::string sampling = "per-rank";   // per-rank | sharded
  int64_t log_every = 100;
  std::string out = ".";
  bool plot = true;
  double bucket_mb = 25, first_bucket_mb = 1;
  bool overlap = true;
  std::string progress = "test";       // test | thread
  int threads = 0;                     // 0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else cores
  std::string gemm;                    // empty: HDDP_GEMM or blocked
  std::string trace;                   // Chrome-trace JSON path ("" = off)
  bool stats = false;
  bool help = false;
};

// Parses argv (without argv[0]); throws UsageError naming the flag on any bad input.
Options parse_options(int argc, const char* const* argv);

std::string help_text(const char* prog);

}  // namespace poly
