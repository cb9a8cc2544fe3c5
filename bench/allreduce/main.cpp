// Allreduce, the data-parallel reducer and compute/communication overlap, under mpiexec.
// Only rank 0 reports; every other rank runs the same benchmarks with a null reporter. Every
// benchmark has a fixed iteration count (Iterations()), so all ranks run the same number of
// collectives whatever their timings - letting Google Benchmark size the runs per rank would
// deadlock.
//
// The parts: cases.h (the benchmarks, listed there) and collectives.cpp, overlap.cpp, step.cpp
// (the measured cases); register.cpp (their names and order); table.cpp (--table-csv); this file
// (the options and main).
//
// --bytes=N[,N...] (ours): the allreduce/ benchmarks of section 1 at these sizes as well, e.g. a
// model's gradient bytes per step (bench/link/link_table.sh: communication alone over a link).
// --table-csv=FILE (ours, not Google Benchmark's): rank 0 writes the allreduce/blocking and
// allreduce/iallreduce_wait/*/nbc:rabenseifner medians as bench/at_scale's allreduce table
// (op,ranks,bytes,seconds,reduction_charged = 1), the table a cluster run gives the replay.
// Run (see bench/results/allreduce.md):
//   OMP_NUM_THREADS=1 mpiexec --allow-run-as-root --oversubscribe --bind-to none -n 2
//     build-bench/bench/bench_allreduce --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
// It also runs as a plain process (an MPI singleton, 1 rank). Random interleaving and warm-up
// time are refused with more than one rank (Google Benchmark seeds its shuffle per process,
// and warm-up sizes itself by time: either would desynchronise the collectives).
#include <benchmark/benchmark.h>
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/allreduce/cases.h"
#include "bench/allreduce/common.h"
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/nbc_algorithm.h>
#include <hddp/kernels/gemm.h>

namespace hddp::bench::allreduce {
namespace {

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

bool has_flag(int argc, char** argv, const char* prefix) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

// --bytes=N[,N...] (ours): section 1 for these sizes too (a model's gradient bytes per step).
std::vector<int64_t> extra_sizes(int argc, char** argv) {
  std::vector<int64_t> v;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--bytes=", 8) != 0) continue;
    std::string list = argv[i] + 8;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string item = list.substr(at, comma - at);
      char* end = nullptr;
      const long long n = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || n < 4 || n % 4 != 0 || n > (int64_t(1) << 31))
        throw Error("bench_allreduce: --bytes: '" + item + "' is not a whole number of floats' bytes (4 to 2^31, a multiple of 4)");
      v.push_back(n);
      at = comma + 1;
    }
  }
  return v;
}

}  // namespace
}  // namespace hddp::bench::allreduce

using namespace hddp;
using namespace hddp::bench::allreduce;

int main(int argc, char** argv) {
  try {
    register_all(extra_sizes(argc, argv));
    hddp::mpi::Env env(&argc, &argv, thread_level(argc, argv));
    if (env.size() > 1 && (has_flag(argc, argv, "--benchmark_enable_random_interleaving") ||
                           has_flag(argc, argv, "--benchmark_min_warmup_time")))
      throw Error("bench_allreduce: --benchmark_enable_random_interleaving and --benchmark_min_warmup_time "
                  "differ between ranks and would deadlock the collectives; run without them");
    // --table-csv=FILE is ours, not Google Benchmark's: taken out before it parses.
    std::string table_csv;
    std::vector<char*> args(argv, argv + argc);
    for (auto it = args.begin() + 1; it != args.end();)
      if (std::strncmp(*it, "--table-csv=", 12) == 0) table_csv = *it + 12, it = args.erase(it);
      else if (std::strncmp(*it, "--bytes=", 8) == 0) it = args.erase(it);
      else ++it;
    // Other ranks: no file output either (they would overwrite rank 0's --benchmark_out).
    if (!env.root())
      args.erase(std::remove_if(args.begin() + 1, args.end(),
                                [](char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; }),
                 args.end());
    int nargs = static_cast<int>(args.size());
    args.push_back(nullptr);
    benchmark::Initialize(&nargs, args.data());
    if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) return 1;
    benchmark::AddCustomContext("mpi_ranks", std::to_string(env.size()));
    benchmark::AddCustomContext("mpi_thread_level", mpi::thread_level_name(env.thread_level()));
    benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
    benchmark::AddCustomContext("hddp_kernel", gemm_kernel_name());
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    HDDP_MPI(MPI_Get_library_version(version, &len));
    std::string v(version);
    benchmark::AddCustomContext("mpi_library", v.substr(0, v.find(',')));
    benchmark::AddCustomContext("libnbc_iallreduce_algorithm_env", NbcAlgorithm().current());
    if (env.root()) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      NullReporter null;
      benchmark::RunSpecifiedBenchmarks(&null);
    }
    benchmark::Shutdown();
    if (env.root() && !table_csv.empty()) write_table_csv(table_csv);
    barrier();
  } catch (const std::exception& e) {
    mpi::abort_all(1, e.what());
  }
  return 0;
}
