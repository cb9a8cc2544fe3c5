// GEMM micro-benchmarks: hddp's blocked GEMM as configured for this CPU (column "hddp": the
// wisdom file or the built-in table, kernels/gemm/gemm_config.h), once per micro-kernel set with its
// built-in blocking ("hddp-avx512", "hddp-avx2"), against the anchors (bench/gemm_anchors.h:
// OpenBLAS with whatever kernel OPENBLAS_CORETYPE or its detection chose, BLIS) and the naive
// twin up to 512^3. Every backend's result is checked against a double-precision oracle before
// it is timed: a wrong one is reported as an error ("wrong results: ..."), never timed.
// Names: gemm/<backend>/<s|d>/<NN|NT|TN>/<M>x<N>x<K>, and .../<name> for a CNN's products
// (conv1_fwd ... fc1_dw, float, below); counters GFLOPS and peak_pct (percent of
// the FMA peak bench_peak's probe measures at start-up for the widest instruction set, same
// precision and thread count); and peak/<s|d>, that probe as a benchmark, so that its
// repetitions interleave with the GEMMs' (gemm_table.py takes % peak from it). Threads come
// from OMP_NUM_THREADS (hddp, OpenBLAS and BLIS).
// The context names the CPU's kernels: hddp_config (and hddp_classes, the other shape classes'
// tiles), openblas_kernel, blis_kernel.
// bench/gemm_table.sh runs it once per OpenBLAS kernel setting and makes the table.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/cnn_gemm_shapes.h"
#include "gemm_anchors.h"
#include <hddp/kernels/units/units_loops.h>
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_backends.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>
#include <hddp/kernels/gemm/gemm_config.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>
#include "peak.h"

namespace {

using hddp::Trans;
using hddp::bench::GemmFn;

// The machine's FMA peak (GFLOP/s) per precision for this thread count, measured once.
double g_peak[2] = {0, 0};

template <class T>
void run_gemm(benchmark::State& state, GemmFn<T> fn, Trans ta, Trans tb, int64_t M, int64_t N,
              int64_t K) {
  std::vector<T> A(M * K), B(K * N), C(M * N);
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> d(-1, 1);
  for (auto& x : A) x = T(d(rng));
  for (auto& x : B) x = T(d(rng));
  const int64_t lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  fn(ta, tb, M, N, K, T(1), A.data(), lda, B.data(), ldb, T(0), C.data(), N);
  const std::string wrong = hddp::bench::oracle_mismatch<T>(ta, tb, M, N, K, T(1), A.data(), lda, B.data(), ldb, C.data(), N);
  if (!wrong.empty()) {
    state.SkipWithError(("wrong results: " + wrong).c_str());
    return;
  }
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

// The CNN's products: bench/cnn_gemm_shapes.h.
using hddp::bench::kCnnProducts;

template <class T>
GemmFn<T> pick(const hddp::bench::Anchor& a);
template <>
GemmFn<float> pick<float>(const hddp::bench::Anchor& a) { return a.s; }
template <>
GemmFn<double> pick<double>(const hddp::bench::Anchor& a) { return a.d; }

// hddp on one kernel set with that set's built-in blocking.
template <class T, const hddp::detail::Kernels& (*Set)()>
void hddp_on(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
             const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  hddp::detail::gemm_blocked_with(Set(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <class T>
void register_all(const char* prec, const std::vector<hddp::bench::Anchor>& anchors) {
  // The tutorial's tiny products, a training step's thin ones (batch x width), squares.
  const Shape shapes[] = {{32, 20, 1},    {32, 1, 20},     {32, 20, 20},    {64, 64, 64},
                          {128, 128, 128}, {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024},
                          {2048, 2048, 2048}, {4096, 1024, 1024}, {256, 1024, 1024}, {256, 4096, 4096}};
  const std::pair<const char*, std::pair<Trans, Trans>> trans[] = {
      {"NN", {Trans::No, Trans::No}}, {"NT", {Trans::No, Trans::Yes}}, {"TN", {Trans::Yes, Trans::No}}};
  std::vector<std::pair<std::string, GemmFn<T>>> backends{{"hddp", &hddp::gemm_blocked<T>}};
  if (hddp::detail::cpu_has_avx512()) backends.push_back({"hddp-avx512", &hddp_on<T, hddp::detail::gemm_kernels_avx512>});
  if (hddp::detail::cpu_has_avx2_fma()) backends.push_back({"hddp-avx2", &hddp_on<T, hddp::detail::gemm_kernels_avx2>});
  for (const auto& a : anchors) backends.push_back({a.name, pick<T>(a)});
  backends.push_back({"naive", &hddp::gemm_naive<T>});
  auto add = [&](const std::string& tname, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K,
                 const std::string& suffix) {
    for (auto& [bname, fn] : backends) {
      if (bname == "naive" && M * N * K > int64_t(512) * 512 * 512) continue;
      const std::string name = std::string("gemm/") + bname + "/" + prec + "/" + tname + "/" + std::to_string(M) +
                               "x" + std::to_string(N) + "x" + std::to_string(K) + suffix;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), [=, fn = fn](benchmark::State& st) {
        run_gemm<T>(st, fn, ta, tb, M, N, K);
      });
      b->UseRealTime();
    }
  };
  for (const Shape& s : shapes)
    for (auto& [tname, t] : trans) add(tname, t.first, t.second, s.M, s.N, s.K, "");
  if (sizeof(T) == 4)  // the CNN trains in float
    for (const hddp::bench::CnnProduct& c : kCnnProducts)
      add(std::string(c.ta == Trans::No ? "N" : "T") + (c.tb == Trans::No ? "N" : "T"), c.ta, c.tb, c.M, c.N, c.K,
          std::string("/") + c.name);
}

// bf16 products (kernels/gemm_bf16.h): "gemm/hddp-bf16/h/..." float inputs rounded as they are
// packed (what a layer in Precision::Bf16 runs), ".../b/..." bf16 inputs (what PyTorch's bf16
// matmul takes: bench/gemm/matmul_pytorch.py), on the set chosen for this CPU, and one row per
// set this CPU runs ("hddp-avx512bf16", "hddp-amx"), beside the float rows of the same shapes.
// Checked against the naive twin (sums in another order: a relative 1e-5 of K) before timing.
template <class In>
using Bf16FnOf = void (*)(Trans, Trans, int64_t, int64_t, int64_t, float, const In*, int64_t, const In*, int64_t, float,
                          float*, int64_t);
using Bf16Fn = Bf16FnOf<float>;
using Bf16InFn = Bf16FnOf<hddp::bf16>;

// In: float (the set rounds as it packs) or hddp::bf16 (the inputs converted once, here).
template <class In>
void run_bf16(benchmark::State& state, Bf16FnOf<In> fn, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K) {
  std::vector<float> A(M * K), B(K * N), C(M * N), want(M * N);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto& x : A) x = d(rng);
  for (auto& x : B) x = d(rng);
  std::vector<In> Ai(A.size()), Bi(B.size());
  if constexpr (std::is_same_v<In, float>) {
    Ai = A, Bi = B;
  } else {
    hddp::to_bf16(int64_t(A.size()), A.data(), Ai.data());
    hddp::to_bf16(int64_t(B.size()), B.data(), Bi.data());
  }
  const int64_t lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  fn(ta, tb, M, N, K, 1.0f, Ai.data(), lda, Bi.data(), ldb, 0.0f, C.data(), N);
  if (M * N * K <= int64_t(256) * 1024 * 1024) {
    hddp::detail::gemm_bf16_naive(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, want.data(), N);
    for (int64_t i = 0; i < M * N; ++i)
      if (std::fabs(C[i] - want[i]) > 1e-5 * double(K)) {
        state.SkipWithError(("wrong results at " + std::to_string(i)).c_str());
        return;
      }
  }
  for (auto _ : state) {
    fn(ta, tb, M, N, K, 1.0f, Ai.data(), lda, Bi.data(), ldb, 0.0f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  const double gflop = 2.0 * M * N * K * 1e-9;
  state.counters["GFLOPS"] = benchmark::Counter(gflop, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = omp_get_max_threads();
}

template <const hddp::detail::Bf16Kernels& (*Set)()>
void bf16_inputs_on(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const hddp::bf16* A, int64_t lda,
                    const hddp::bf16* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  hddp::detail::gemm_bf16_with(Set(), ta, tb, M, N, K, alpha, reinterpret_cast<const uint16_t*>(A), lda,
                               reinterpret_cast<const uint16_t*>(B), ldb, beta, C, ldc);
}

template <const hddp::detail::Bf16Kernels& (*Set)()>
void bf16_on(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
             const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  hddp::detail::gemm_bf16_with(Set(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void register_bf16() {
  struct Set {
    std::string name;
    Bf16Fn fn;
    Bf16InFn in_fn;
  };
  std::vector<Set> sets{{"hddp-bf16", &hddp::gemm_bf16, &hddp::gemm_bf16}};
  if (hddp::gemm_bf16_unsupported_reason("avx512bf16").empty())
    sets.push_back({"hddp-avx512bf16", &bf16_on<hddp::detail::gemm_bf16_kernels_avx512bf16>,
                    &bf16_inputs_on<hddp::detail::gemm_bf16_kernels_avx512bf16>});
  if (hddp::gemm_bf16_unsupported_reason("amx").empty())
    sets.push_back({"hddp-amx", &bf16_on<hddp::detail::gemm_bf16_kernels_amx>,
                    &bf16_inputs_on<hddp::detail::gemm_bf16_kernels_amx>});
  auto add = [&](const std::string& tname, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const std::string& suffix) {
    const std::string shape = tname + "/" + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + suffix;
    for (const Set& set : sets) {
      benchmark::RegisterBenchmark(("gemm/" + set.name + "/h/" + shape).c_str(), [=, fn = set.fn](benchmark::State& st) {
        run_bf16<float>(st, fn, ta, tb, M, N, K);
      })->UseRealTime();
      benchmark::RegisterBenchmark(("gemm/" + set.name + "/b/" + shape).c_str(), [=, fn = set.in_fn](benchmark::State& st) {
        run_bf16<hddp::bf16>(st, fn, ta, tb, M, N, K);
      })->UseRealTime();
    }
  };
  const Shape shapes[] = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}, {256, 1024, 1024}};
  for (const Shape& s : shapes) {
    add("NN", Trans::No, Trans::No, s.M, s.N, s.K, "");
    add("NT", Trans::No, Trans::Yes, s.M, s.N, s.K, "");
    add("TN", Trans::Yes, Trans::No, s.M, s.N, s.K, "");
  }
  for (const hddp::bench::CnnProduct& c : kCnnProducts)
    add(std::string(c.ta == Trans::No ? "N" : "T") + (c.tb == Trans::No ? "N" : "T"), c.ta, c.tb, c.M, c.N, c.K,
        std::string("/") + c.name);
}

// The FMA peak as a benchmark of its own, "peak/<s|d>": repetitions interleave with the GEMMs',
// so a machine whose speed drifts (a VM) gives each GEMM a peak measured in the same minutes.
void run_peak(benchmark::State& state, bool dbl) {
  using namespace hddp::bench;
  const Isa isa = widest_isa();
  int64_t flops = 0;
  for (auto _ : state) {
#pragma omp parallel reduction(+ : flops)
    flops += isa == Isa::Avx512 ? hddp::detail::unit_loop_fma_avx512(dbl, 100000) : hddp::detail::unit_loop_fma_avx2(dbl, 100000);
  }
  state.counters["GFLOPS"] = benchmark::Counter(double(flops) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["threads"] = omp_get_max_threads();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> absent;
  const std::vector<hddp::bench::Anchor> anchors = hddp::bench::gemm_anchors(absent);
  register_all<float>("s", anchors);
  register_all<double>("d", anchors);
  register_bf16();
  benchmark::RegisterBenchmark("peak/s", [](benchmark::State& st) { run_peak(st, false); })->UseRealTime();
  benchmark::RegisterBenchmark("peak/d", [](benchmark::State& st) { run_peak(st, true); })->UseRealTime();
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
  benchmark::AddCustomContext("hddp_bf16_kernel", hddp::gemm_bf16_kernel_name());
  benchmark::AddCustomContext("hddp_config", hddp::gemm_config_description());
  const hddp::detail::Kernels& k = hddp::detail::cpu_kernels();
  benchmark::AddCustomContext("hddp_classes",
                              "float " + hddp::detail::describe_classes(k.s.blockings()) + "; double " +
                                  hddp::detail::describe_classes(k.d.blockings()));
  benchmark::AddCustomContext("omp_max_threads", std::to_string(threads));
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  benchmark::AddCustomContext("openblas_coretype_env", coretype ? coretype : "unset");
  for (const auto& a : anchors) benchmark::AddCustomContext(a.name + "_kernel", a.kernel);
  std::string missing;
  for (const auto& why : absent) {
    std::fprintf(stderr, "bench_gemm: anchor left out: %s\n", why.c_str());
    missing += (missing.empty() ? "" : "; ") + why;
  }
  benchmark::AddCustomContext("anchors_absent", missing);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
