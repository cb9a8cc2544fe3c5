// bench_allreduce's benchmarks by name (cases.h lists them), in the order they run, and the MPI
// thread level the selected ones need.
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "bench/allreduce/cases.h"
#include "bench/allreduce/common.h"

namespace hddp::bench::allreduce {

namespace {

// Every registered name, for thread_level() below.
std::vector<std::string> g_names;

template <class F>
benchmark::internal::Benchmark* reg(const std::string& name, F&& fn) {
  g_names.push_back(name);
  return benchmark::RegisterBenchmark(name.c_str(), std::forward<F>(fn));
}

}  // namespace

// The lowest MPI thread level the benchmarks selected by --benchmark_filter need: SERIALIZED
// when one runs a progress thread (names with "thread", and every step/ benchmark, which runs
// the thread modes), FUNNELED otherwise. The level has a cost of its own: SERIALIZED adds
// 0.1-0.15 us to a small allreduce here (bench/results/allreduce.md).
int thread_level(int argc, char** argv) {
  std::string filter = ".";  // Google Benchmark's default: everything
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_filter=", 19) == 0) filter = argv[i] + 19;
  const bool negative = !filter.empty() && filter[0] == '-';
  const std::regex re(negative ? filter.substr(1) : filter);
  for (const std::string& name : g_names)
    if (std::regex_search(name, re) != negative && (name.find("thread") != std::string::npos || name.rfind("step/", 0) == 0))
      return MPI_THREAD_SERIALIZED;
  return MPI_THREAD_FUNNELED;
}

void register_all(const std::vector<int64_t>& extra_sizes) {
  const int nbcs[] = {kBinomial, kRabenseifner};
  // 1. latency / bandwidth, 4 B ... 64 MiB in powers of 4, and the --bytes sizes: MPI_Allreduce,
  //    then Iallreduce + Wait with libnbc's binomial tree (its choice here) and with rabenseifner.
  std::vector<int64_t> sizes;
  for (int64_t bytes = 4; bytes <= (int64_t(64) << 20); bytes *= 4) sizes.push_back(bytes);
  sizes.insert(sizes.end(), extra_sizes.begin(), extra_sizes.end());
  for (size_t i = 0; i < sizes.size(); ++i)
    for (int variant = 0; variant < 3; ++variant) {
      const int64_t bytes = sizes[i];
      const bool nb = variant > 0;
      const int nbc = variant == 2 ? kRabenseifner : kBinomial;
      // A --bytes size is named in bytes, as given ("1583104B", not "1546KiB").
      const std::string size = i + extra_sizes.size() >= sizes.size() ? std::to_string(bytes) + "B" : size_name(bytes);
      std::string name = std::string("allreduce/") + (nb ? "iallreduce_wait/" : "blocking/") + size;
      if (nb) name += std::string("/nbc:") + nbc_name(nbc);
      reg(name, [bytes, nb, nbc](benchmark::State& st) { bm_allreduce(st, bytes, nb, nbc); })
          ->Iterations(iterations_for(bytes, double(int64_t(1) << 28), 10, 50000))
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  // 1b. the same, finely interleaved (in place and separate buffers), 4 B ... 64 MiB.
  for (int64_t bytes = 4; bytes <= (int64_t(64) << 20); bytes *= 4)
    reg("pairs/" + size_name(bytes), [bytes](benchmark::State& st) { bm_pairs(st, bytes); })
        ->Iterations(iterations_for(bytes, double(int64_t(1) << 27), 12, 400))
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  // 2. reducer overhead: its three modes with its default libnbc algorithm, and Test mode
  //    with libnbc's binomial tree.
  const struct {
    const char* name;
    ReduceMode mode;
    int nbc;
  } rmodes[] = {{"blocking", ReduceMode::Blocking, kRabenseifner},
                {"test", ReduceMode::Test, kRabenseifner},
                {"thread", ReduceMode::Thread, kRabenseifner},
                {"test_binomial", ReduceMode::Test, kBinomial}};
  for (int64_t bytes : {int64_t(4), int64_t(1) << 10, int64_t(64) << 10, int64_t(1) << 20, int64_t(4) << 20,
                        int64_t(16) << 20, int64_t(64) << 20})
    for (const auto& m : rmodes) {
      const std::string name = std::string("allreduce/reducer/") + m.name + "/" + size_name(bytes);
      reg(name, [bytes, m](benchmark::State& st) { bm_reducer(st, bytes, m.mode, m.nbc); })
          ->Iterations(iterations_for(bytes, double(int64_t(1) << 27), 10, 20000))
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  // 3. overlap per strategy, size and libnbc algorithm; then the reducer's poll interval.
  auto overlap_iters = [](int64_t bytes) -> int64_t { return bytes <= (int64_t(1) << 20) ? 60 : bytes <= (int64_t(4) << 20) ? 30 : 12; };
  const Strategy strategies[] = {Strategy::None, Strategy::MpiTest, Strategy::ReducerTest, Strategy::ReducerThread};
  for (int64_t bytes : {int64_t(1) << 20, int64_t(4) << 20, int64_t(16) << 20})
    for (int nbc : nbcs)
      for (Strategy s : strategies) {
        const std::string name = std::string("overlap/") + to_string(s) + "/" + size_name(bytes) + "/nbc:" + nbc_name(nbc);
        reg(name, [bytes, s, nbc](benchmark::State& st) { bm_overlap(st, bytes, s, nbc, 50); })
            ->Iterations(overlap_iters(bytes))
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  for (int nbc : nbcs)
    for (double poll : {10.0, 200.0, 1000.0})
      for (Strategy s : {Strategy::ReducerTest, Strategy::ReducerThread}) {
        const int64_t bytes = int64_t(4) << 20;
        const std::string name = std::string("overlap/") + to_string(s) + "/" + size_name(bytes) + "/nbc:" +
                                 nbc_name(nbc) + "/poll_us:" + std::to_string(int(poll));
        reg(name, [bytes, s, nbc, poll](benchmark::State& st) { bm_overlap(st, bytes, s, nbc, poll); })
            ->Iterations(overlap_iters(bytes))
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  // 4. the MLP 1-1024x4-1's training step, Adam; then plain SGD at batch 8, where the optimizer no longer
  //    dominates the step and communication is a larger share of it.
  for (int64_t batch : {256, 32, 8})
    for (int64_t cap_mib : {25, 4}) {
      const std::string name = "step/wide/b" + std::to_string(batch) + "/cap" + std::to_string(cap_mib) + "MiB";
      reg(name, [batch, cap_mib](benchmark::State& st) { bm_step(st, batch, cap_mib << 20, false); })
          ->Iterations(batch >= 256 ? 8 : batch >= 32 ? 20 : 30)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  for (int64_t cap_mib : {25, 4}) {
    const int64_t batch = 8;
    const std::string name = "step/wide/b" + std::to_string(batch) + "/cap" + std::to_string(cap_mib) + "MiB/sgd";
    reg(name, [batch, cap_mib](benchmark::State& st) { bm_step(st, batch, cap_mib << 20, true); })
        ->Iterations(40)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace hddp::bench::allreduce
