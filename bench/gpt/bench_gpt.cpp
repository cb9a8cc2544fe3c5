// The GPT's training step and its parts on one process (core/gpt.h), in float and in bf16, with
// their rates against the machine's probe (bench/peak: the FMA probe for float, the AMX or
// AVX512_BF16 probe of the unit bf16 products run on):
//   gpt/<config>/step/<float|bf16>        zero_grad, forward, cross-entropy over every position,
//                                         backward, clipping, AdamW (the whole step)
//   gpt/<config>/attention-block/<prec>   Residual(LayerNorm, Linear(C, 3C), attention, Linear(C, C)), fwd+bwd
//   gpt/<config>/mlp-block/<prec>         Residual(LayerNorm, Linear(C, 4C), GELU, Linear(4C, C)), fwd+bwd
//   gpt/<config>/attention/fused          the fused causal attention alone (kernels/attention.h), fwd+bwd
//   gpt/<config>/attention/naive          its naive twin (the whole T x T matrix), fwd+bwd
//   gpt/<config>/layernorm, .../gelu      the element-wise kernels, fwd+bwd (GB/s: values read and written)
// Configs: small (4 layers, 4 heads, C 128, T 64, batch 12: 0.83 M parameters), medium (6, 6,
// 384, 256, 16: 10.8 M). GFLOPS counts a forward's flops (Layer::flops) three times (backward
// twice the forward); peak_pct is that rate over the probe at the same thread count.
// Goal: gpt/medium/step/float >= 50 % of the FMA probe on one thread.
//   OMP_NUM_THREADS=1 build/bench/bench_gpt --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <string>
#include <vector>

#include <hddp/core/gpt.h>
#include <hddp/core/layers.h>
#include <hddp/core/loss.h>
#include <hddp/core/optim.h>
#include <hddp/core/residual.h>
#include <hddp/core/transformer.h>
#include <hddp/kernels/attention.h>
#include <hddp/kernels/elementwise.h>
#include <hddp/kernels/units.h>

#include "peak.h"

namespace {

using namespace hddp;

struct Cfg {
  const char* name;
  GptConfig c;
  int64_t batch;
};
const Cfg kConfigs[] = {{"small", {256, 64, 4, 4, 128}, 12}, {"medium", {256, 256, 6, 6, 384}, 16}};

// The probe the rate of `prec` is measured against, once per process.
double peak(Precision prec) {
  static const double fma = bench::fma_peak_gflops(bench::widest_isa(), false, omp_get_max_threads());
  static const double bf16 = [] {
    const Bf16Unit u = bf16_unit();
    if (u == Bf16Unit::Amx) return bench::fma_peak_gflops(bench::Isa::AmxBf16, false, omp_get_max_threads());
    if (u == Bf16Unit::Avx512Bf16) return bench::fma_peak_gflops(bench::Isa::Avx512Bf16, false, omp_get_max_threads());
    return fma;
  }();
  return prec == Precision::Bf16 ? bf16 : fma;
}

void rate(benchmark::State& st, double flops, Precision prec, std::chrono::steady_clock::time_point t0) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["peak_pct"] = 100.0 * flops * 1e-9 * double(st.iterations()) / s / peak(prec);
  st.counters["omp_threads"] = omp_get_max_threads();
}

std::vector<float> tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Rng r(seed);
  std::vector<float> t(static_cast<size_t>(n));
  for (auto& v : t) v = float(int64_t(r.uniform01<double>() * double(vocab)));
  return t;
}

void run_step(benchmark::State& st, const Cfg& g, Precision prec) {
  Rng rng(1, 0);
  Sequential<float> m({g.c.context}, gpt_layers(g.c), g.batch);
  gpt_init(m, g.c, rng);
  m.set_precision(prec);
  AdamW<float> opt(m.num_params(), {.lr = 1e-4, .beta2 = 0.99, .weight_decay = 0.1});
  opt.set_decay_groups(m.param_views());
  const std::vector<float> x = tokens(g.batch * g.c.context, g.c.vocab, 2), yf = tokens(g.batch * g.c.context, g.c.vocab, 3);
  const std::vector<int32_t> y(yf.begin(), yf.end());
  SoftmaxCrossEntropy<float> xent(g.c.vocab);
  double loss = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    m.zero_grad();
    loss = xent.forward(m.forward(x, g.batch), y.data(), g.batch * g.c.context);
    m.backward(xent.grad());
    clip_grad_norm(m.num_params(), m.grads(), 1.0);
    opt.step(m.params(), m.grads());
    benchmark::DoNotOptimize(loss);
  }
  double flops = 0;
  for (size_t i = 0; i < m.num_layers(); ++i) flops += 3.0 * m.layer(i).flops(g.batch);
  rate(st, flops, prec, t0);
  st.counters["loss"] = loss;
  st.counters["params"] = double(m.num_params());
}

// One residual block forward and backward, its input gradient wanted (a Linear before it).
void run_block(benchmark::State& st, const Cfg& g, Precision prec, bool attention) {
  const int64_t C = g.c.dim, T = g.c.context;
  std::vector<LayerSpec> chain = attention
      ? std::vector<LayerSpec>{LayerNorm(C), Linear(C, 3 * C), CausalSelfAttention(C, g.c.heads), Linear(C, C)}
      : std::vector<LayerSpec>{LayerNorm(C), Linear(C, 4 * C), GELU(), Linear(4 * C, C)};
  Rng rng(1, 0);
  Sequential<float> m({T, C}, {LayerNorm(C), Residual(chain)}, g.batch, rng);
  m.set_precision(prec);
  std::vector<float> x(size_t(g.batch * T * C)), dy(x.size());
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : dy) v = rng.uniform(-1.0f, 1.0f);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    m.zero_grad();
    m.forward(x, g.batch);
    m.backward(dy.data());
    benchmark::ClobberMemory();
  }
  rate(st, 3.0 * m.layer(1).flops(g.batch), prec, t0);
}

void run_attention(benchmark::State& st, const Cfg& g, bool naive) {
  const AttentionShape s{g.batch, g.c.context, g.c.dim, g.c.heads};
  Rng rng(4);
  std::vector<float> qkv(size_t(s.B * s.T * 3 * s.C)), dout(size_t(s.B * s.T * s.C)), out(dout.size()),
      lse(size_t(s.B * s.H * s.T)), dqkv(qkv.size());
  for (auto& v : qkv) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : dout) v = rng.uniform(-1.0f, 1.0f);
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : st) {
    if (naive) {
      attention_naive_forward(s, qkv.data(), out.data(), lse.data());
      attention_naive_backward(s, qkv.data(), out.data(), lse.data(), dout.data(), dqkv.data());
    } else {
      attention_forward(s, qkv.data(), out.data(), lse.data());
      attention_backward(s, qkv.data(), out.data(), lse.data(), dout.data(), dqkv.data());
    }
    benchmark::ClobberMemory();
  }
  // q.k and p.v per visible pair forward; backward recomputes q.k and adds dP, dV, dK, dQ: 3x.
  rate(st, 3.0 * 2.0 * double(s.B) * double(s.T) * double(s.T + 1) * double(s.C), Precision::Float, t0);
}

void run_elementwise(benchmark::State& st, const Cfg& g, bool layernorm) {
  const int64_t C = layernorm ? g.c.dim : 4 * g.c.dim, rows = g.batch * g.c.context;
  Rng rng(5);
  const size_t n = size_t(rows * C), c = size_t(C), r = size_t(rows);
  std::vector<float> x(n), y(n), dy(n), dx(n), w(c, 1.0f), b(c, 0.0f), dw(c), db(c), mean(r), rstd(r),
      scratch(size_t(layernorm_backward_scratch(rows, C)));
  for (auto& v : x) v = rng.uniform(-2.0f, 2.0f);
  for (auto& v : dy) v = rng.uniform(-1.0f, 1.0f);
  for (auto _ : st) {
    if (layernorm) {
      layernorm_forward(rows, C, x.data(), w.data(), b.data(), 1e-5, y.data(), mean.data(), rstd.data());
      layernorm_backward(rows, C, x.data(), w.data(), mean.data(), rstd.data(), dy.data(), dx.data(), dw.data(), db.data(),
                         false, scratch.data());
    } else {
      gelu_forward(rows * C, x.data(), y.data());
      gelu_backward(rows * C, x.data(), dy.data(), dx.data());
    }
    benchmark::ClobberMemory();
  }
  // Values moved: forward reads x, writes y; backward reads x and dy, writes dx.
  st.counters["GBps"] = benchmark::Counter(5.0 * 4.0 * double(rows * C) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  for (const Cfg& g : kConfigs) {
    const std::string p = std::string("gpt/") + g.name + "/";
    for (Precision prec : {Precision::Float, Precision::Bf16}) {
      const std::string s = to_string(prec);
      benchmark::RegisterBenchmark((p + "step/" + s).c_str(), [g, prec](benchmark::State& st) { run_step(st, g, prec); })
          ->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((p + "attention-block/" + s).c_str(),
                                   [g, prec](benchmark::State& st) { run_block(st, g, prec, true); })
          ->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((p + "mlp-block/" + s).c_str(), [g, prec](benchmark::State& st) { run_block(st, g, prec, false); })
          ->UseRealTime()->Unit(benchmark::kMillisecond);
    }
    benchmark::RegisterBenchmark((p + "attention/fused").c_str(), [g](benchmark::State& st) { run_attention(st, g, false); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((p + "attention/naive").c_str(), [g](benchmark::State& st) { run_attention(st, g, true); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((p + "layernorm").c_str(), [g](benchmark::State& st) { run_elementwise(st, g, true); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark((p + "gelu").c_str(), [g](benchmark::State& st) { run_elementwise(st, g, false); })
        ->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("attention_kernel", attention_kernel_name());
  benchmark::AddCustomContext("bf16_unit", to_string(bf16_unit()));
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
