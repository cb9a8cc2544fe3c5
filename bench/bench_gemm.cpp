// GEMM micro-benchmarks: hddp's blocked GEMM, once per micro-kernel this CPU can execute, vs
// OpenBLAS (and the naive twin up to 512).
// Names: gemm/<backend>/<s|d>/<NN|NT|TN>/<M>x<N>x<K>, backend hddp-avx512, hddp-avx2, openblas,
// naive; counters GFLOPS and peak_pct (percent of the FMA peak that bench_peak measures for the
// widest instruction set, same precision and thread count, at start-up). Threads come from
// OMP_NUM_THREADS (both hddp and the OpenMP build of OpenBLAS follow it).
// Compare backends side by side in one run, e.g.
//   OMP_NUM_THREADS=1 build/bench/bench_gemm --benchmark_filter='/s/NN/1024x'
//     --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_ukernel.h"
#include "peak.h"

namespace {

using hddp::Trans;

template <class T>
using GemmFn = void (*)(Trans, Trans, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,
                        int64_t, T, T*, int64_t);

// The machine's FMA peak (GFLOP/s) per precision for this thread count, measured once.
double g_peak[2] = {0, 0};

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
  const double gflop = 2.0 * M * N * K * 1e-9, peak = g_peak[sizeof(T) == 8];
  state.counters["GFLOPS"] = benchmark::Counter(gflop, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_pct"] = benchmark::Counter(100 * gflop / peak, benchmark::Counter::kIsIterationInvariantRate);
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
  // hddp once per SIMD kernel set the CPU can execute (portable: only in the tests).
  std::vector<std::pair<std::string, GemmFn<T>>> backends;
  if (hddp::detail::cpu_has_avx512())
    backends.push_back({"hddp-avx512", [](Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha,
                                          const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C,
                                          int64_t ldc) {
      hddp::detail::gemm_blocked_with(hddp::detail::avx512_kernels(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }});
  if (hddp::detail::cpu_has_avx2_fma())
    backends.push_back({"hddp-avx2", [](Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha,
                                        const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C,
                                        int64_t ldc) {
      hddp::detail::gemm_blocked_with(hddp::detail::avx2_kernels(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    }});
  if (backends.empty()) backends.push_back({"hddp-portable", &hddp::gemm_blocked<T>});
  backends.push_back({"openblas", &hddp::gemm_openblas<T>});
  backends.push_back({"naive", &hddp::gemm_naive<T>});
  for (const Shape& s : shapes)
    for (auto& [tname, t] : trans)
      for (auto& [bname, fn] : backends) {
        if (bname == "naive" && s.M * s.N * s.K > int64_t(512) * 512 * 512) continue;
        const std::string name = std::string("gemm/") + bname + "/" + prec + "/" + tname + "/" +
                                 std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), [=, fn = fn](benchmark::State& st) {
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
  using namespace hddp::bench;
  const Isa isa = widest_isa();
  const int threads = omp_get_max_threads();
  g_peak[0] = fma_peak_gflops(isa, false, threads, 0.5);
  g_peak[1] = fma_peak_gflops(isa, true, threads, 0.5);
  char peak[128];
  std::snprintf(peak, sizeof peak, "%s float %.1f, double %.1f GFLOP/s on %d threads", to_string(isa),
                g_peak[0], g_peak[1], threads);
  benchmark::AddCustomContext("fma_peak", peak);
  benchmark::AddCustomContext("hddp_kernel", hddp::gemm_kernel_name());
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
