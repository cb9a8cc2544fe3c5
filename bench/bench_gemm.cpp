// GEMM micro-benchmarks: hddp's blocked GEMM vs OpenBLAS (and the naive twin up to 512).
// Names: gemm/<backend>/<s|d>/<NN|NT|TN>/<M>x<N>x<K>; counter GFLOPS. Threads come from
// OMP_NUM_THREADS (both hddp and the OpenMP build of OpenBLAS follow it).
// Compare backends side by side in one run, e.g.
//   OMP_NUM_THREADS=1 build/bench/bench_gemm --benchmark_filter='/s/NN/1024x'
//     --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/gemm.h"

namespace {

using hddp::Trans;

template <class T>
using GemmFn = void (*)(Trans, Trans, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,
                        int64_t, T, T*, int64_t);

template <class T>
void run_gemm(benchmark::State& state, GemmFn<T> fn, Trans ta, Trans tb, int64_t M, int64_t N,
              int64_t K) {
  std::vector<T> A(M * K), B(K * N), C(M * N);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> d(-100, 100);  // exact in any order; no denormals
  for (auto& x : A) x = T(d(rng)) / 128;
  for (auto& x : B) x = T(d(rng)) / 128;
  const int64_t lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  for (auto _ : state) {
    fn(ta, tb, M, N, K, T(1), A.data(), lda, B.data(), ldb, T(0), C.data(), N);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
}

struct Shape {
  int64_t M, N, K;
};

template <class T>
void register_all(const char* prec) {
  const Shape shapes[] = {{32, 20, 1},    {32, 1, 20},     {32, 20, 20},    {64, 64, 64},
                          {128, 128, 128}, {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024},
                          {2048, 2048, 2048}, {4096, 1024, 1024}, {256, 4096, 4096}};
  const std::pair<const char*, std::pair<Trans, Trans>> trans[] = {
      {"NN", {Trans::No, Trans::No}}, {"NT", {Trans::No, Trans::Yes}}, {"TN", {Trans::Yes, Trans::No}}};
  const std::pair<const char*, GemmFn<T>> backends[] = {
      {"hddp", &hddp::gemm_blocked<T>}, {"openblas", &hddp::gemm_openblas<T>}, {"naive", &hddp::gemm_naive<T>}};
  for (const Shape& s : shapes)
    for (auto& [tname, t] : trans)
      for (auto& [bname, fn] : backends) {
        if (std::string(bname) == "naive" && s.M * s.N * s.K > int64_t(512) * 512 * 512) continue;
        const std::string name = std::string("gemm/") + bname + "/" + prec + "/" + tname + "/" +
                                 std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) {
          run_gemm<T>(st, fn, t.first, t.second, s.M, s.N, s.K);
        });
        b->UseRealTime();
        if (s.M * s.N * s.K >= int64_t(1) << 30) b->MinTime(1.0);
      }
}

}  // namespace

int main(int argc, char** argv) {
  register_all<float>("s");
  register_all<double>("d");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("hddp_kernel", hddp::gemm_kernel_name());
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
