// The element-wise loops per kernel set beside a plain copy, one thread (and Adam and tanh
// through the library's threaded entry points: adam/threaded, tanh/threaded), in bytes moved per
// second: Adam (reads param, grad, m, v; writes param, m, v: 28 B per float), SGD with momentum
// (20 B), tanh forward (8 B), the non-finite check (4 B), and a copy of the same floats
// (std::memcpy, 8 B) as the bandwidth anchor. Sizes: 2^20 floats (4 MiB per array, in cache on
// most server CPUs) and 2^24 (64 MiB, memory).
//   build/bench/bench_elementwise [--benchmark_filter=...] [--benchmark_format=json]
// Counters: bytes_per_second (Google Benchmark's), n.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <hddp/kernels/elementwise.h>
#include <hddp/kernels/elementwise/elementwise_ukernel.h>

namespace {

using hddp::detail::EltKernels;
using hddp::detail::EltLoops;

std::vector<float> values(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = base + float(i % 1000) * 1e-4f;
  return v;
}

void copy(benchmark::State& st, int64_t n) {
  auto a = values(n, 0.5f), b = values(n, 0.1f);
  for (auto _ : st) {
    std::memcpy(b.data(), a.data(), sizeof(float) * size_t(n));
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 8);
}

void adam(benchmark::State& st, const EltLoops<float>& k, int64_t n) {
  auto p = values(n, 0.5f), g = values(n, 0.01f), m = values(n, 0.0f), v = values(n, 0.001f);
  const hddp::detail::AdamScalars<float> s{0.9f, 0.999f, 0.1f, 0.001f, 1e-8f, 0.0f, 1e-3f, 0.5f};
  for (auto _ : st) {
    k.adam(n, p.data(), g.data(), m.data(), v.data(), s);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 28);
}

void sgd(benchmark::State& st, const EltLoops<float>& k, int64_t n) {
  auto p = values(n, 0.5f), g = values(n, 0.01f), buf = values(n, 0.0f);
  const hddp::detail::SgdScalars<float> s{1e-3f, 0.9f, 0.0f, false, false};
  for (auto _ : st) {
    k.sgd(n, p.data(), g.data(), buf.data(), s);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 20);
}

void tanh(benchmark::State& st, const EltLoops<float>& k, int64_t n) {
  auto x = values(n, -0.3f), y = values(n, 0.0f);
  for (auto _ : st) {
    k.tanh_forward(n, x.data(), y.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 8);
}

// The library's own entry points, which split the loop over OMP_NUM_THREADS threads (the loops
// above run on one): what the thread-scaling study times.
void adam_threaded(benchmark::State& st, int64_t n) {
  auto p = values(n, 0.5f), g = values(n, 0.01f), m = values(n, 0.0f), v = values(n, 0.001f);
  int64_t step = 0;
  for (auto _ : st) {
    hddp::adam_update(n, p.data(), g.data(), m.data(), v.data(), ++step, hddp::AdamHyper{});
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 28);
}

void tanh_threaded(benchmark::State& st, int64_t n) {
  auto x = values(n, -0.3f), y = values(n, 0.0f);
  for (auto _ : st) {
    hddp::tanh_forward(n, x.data(), y.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 8);
}

void all_finite(benchmark::State& st, const EltLoops<float>& k, int64_t n) {
  auto x = values(n, 0.5f);
  for (auto _ : st) benchmark::DoNotOptimize(k.all_finite(n, x.data()));
  st.SetBytesProcessed(int64_t(st.iterations()) * n * 4);
}

}  // namespace

// "what/set/n" (snprintf: GCC 12 warns falsely on std::string concatenation here).
std::string bench_name(const char* what, const char* set, int64_t n) {
  char buf[96];
  if (*set) std::snprintf(buf, sizeof buf, "%s/%s/%lld", what, set, (long long)n);
  else std::snprintf(buf, sizeof buf, "%s/%lld", what, (long long)n);
  return buf;
}

int main(int argc, char** argv) {
  for (int64_t n : {int64_t(1) << 20, int64_t(1) << 24}) {
    benchmark::RegisterBenchmark(bench_name("copy", "", n).c_str(), [n](benchmark::State& st) { copy(st, n); });
    benchmark::RegisterBenchmark(bench_name("adam", "threaded", n).c_str(), [n](benchmark::State& st) { adam_threaded(st, n); });
    benchmark::RegisterBenchmark(bench_name("tanh", "threaded", n).c_str(), [n](benchmark::State& st) { tanh_threaded(st, n); });
    for (const char* name : {"avx512", "avx2", "portable"}) {
      const EltKernels* set = hddp::detail::elementwise_by_name(name);
      if (!set) continue;  // this CPU cannot run it
      const EltLoops<float>& k = set->s;
      benchmark::RegisterBenchmark(bench_name("adam", name, n).c_str(), [&k, n](benchmark::State& st) { adam(st, k, n); });
      benchmark::RegisterBenchmark(bench_name("sgd", name, n).c_str(), [&k, n](benchmark::State& st) { sgd(st, k, n); });
      benchmark::RegisterBenchmark(bench_name("tanh", name, n).c_str(), [&k, n](benchmark::State& st) { tanh(st, k, n); });
      benchmark::RegisterBenchmark(bench_name("all_finite", name, n).c_str(),
                                   [&k, n](benchmark::State& st) { all_finite(st, k, n); });
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
