// One full training step (zero_grad, forward, MSE loss, backward, Adam step) of
//   tutorial: Linear(1,20) -> Linear(20,1, no bias) -> Tanh, batch 32 (61 parameters)
//   wide:     1 -> 1024 -> 1024 -> 1024 -> 1 with Tanh between, batch 256 (2.1 M parameters)
//   cnn:      (1, 28, 28) -> Conv2d(1,32,3,pad 1) ReLU MaxPool2d(2) -> Conv2d(32,64,3,pad 1) ReLU
//             MaxPool2d(2) -> Flatten -> Linear(3136,128) ReLU -> Linear(128,10), batch 64, an MSE
//             target of 10 outputs (softmax cross-entropy is not part of Sequential) (421 k parameters)
// and one Conv2d alone at the CNN's two shapes, batch 64 (core/conv.h's kernels):
//   conv/c1_1x28x28_to_32/fwd, .../fwd+bwd   the first: dW and db, no dX (the first layer needs none)
//   conv/c2_32x14x14_to_64/fwd, .../fwd+bwd  the second: dW, db and dX
// with hddp's GEMM (GemmBackend::Blocked) and OpenBLAS (GemmBackend::OpenBLAS).
// Names: step/<model>/<hddp|openblas>, conv/<shape>/<pass>/<hddp|openblas>. Threads come from
// OMP_NUM_THREADS. The input batch is fixed (drawing samples is not part of the step). Goal:
// step/tutorial/hddp <= 5 us on one core.
// GFLOPS counts GEMM work only: 3 products of 2·B·in·out per Linear and of 2·B·Cout·OH·OW·Cin·k·k
// per Conv2d in a step (the first layer's input gradient counted, as ever, though not computed);
// the conv rows count the products they run (forward 1, fwd+bwd 2 for c1 and 3 for c2).
//   OMP_NUM_THREADS=1 build/bench/bench_layers --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include <hddp/core/conv.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/kernels/conv.h>
#include <hddp/kernels/gemm.h>

#include "peak.h"

namespace {

using namespace hddp;

struct Config {
  const char* name;
  std::vector<LayerSpec> layers;
  int64_t batch;
  double lr;  // the wide model diverges at 1e-3 over thousands of steps on one fixed batch
  Shape input = {};  // empty: implied by the first Linear
};

void run_step(benchmark::State& state, const Config& cfg, GemmBackend backend) {
  set_gemm_backend(backend);
  Rng rng(1);
  Sequential<float> model = cfg.input.empty() ? Sequential<float>(cfg.layers, cfg.batch, rng)
                                               : Sequential<float>(cfg.input, cfg.layers, cfg.batch, rng);
  Adam<float> adam(model.num_params(), {.lr = cfg.lr});
  const int64_t in = model.in_features(), out = model.out_features();
  std::vector<float> x(size_t(cfg.batch * in)), y(size_t(cfg.batch * out));
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : y) v = rng.uniform(-0.9f, 0.9f);
  float loss = 0;
  for (auto _ : state) {
    model.zero_grad();
    model.forward(x, cfg.batch);
    loss = model.loss(y.data());
    model.backward(y.data());
    adam.step(model.params(), model.grads());
    benchmark::DoNotOptimize(loss);
    benchmark::ClobberMemory();
  }
  // GEMM work per step: forward X·W^T, backward dY·W and dY^T·X: 3 x 2·B·in·out per Linear;
  // the same three products per Conv2d, 3 x its forward's (less the bias).
  double flops = 0;
  for (size_t i = 0; i < model.num_layers(); ++i) {
    if (const auto* l = dynamic_cast<const layers::Linear<float>*>(&model.layer(i)))
      flops += 6.0 * double(cfg.batch) * double(l->in()) * double(l->out());
    if (const auto* c = dynamic_cast<const layers::Conv2d<float>*>(&model.layer(i))) {
      const Shape& out = model.shape_before(i + 1);
      flops += 3.0 * 2.0 * double(cfg.batch) * double(numel(out)) * double(c->in() * c->kernel() * c->kernel());
    }
  }
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params"] = double(model.num_params());
  state.counters["threads"] = omp_get_max_threads();
  state.counters["loss"] = loss;  // the last step's: finite, i.e. the timed arithmetic is normal
}

// One Conv2d, 3x3 pad 1 stride 1, batch B: forward, or forward and backward (with dX or not).
struct ConvCase {
  const char* name;
  int64_t C, H, Cout;
  bool dx;
};

// The FMA probe of this machine at the run's thread count (bench/peak), measured once.
double fma_peak() {
  static const double peak = bench::fma_peak_gflops(bench::widest_isa(), false, omp_get_max_threads());
  return peak;
}

void report_conv(benchmark::State& state, const ConvCase& s, bool backward) {
  const double products = backward ? (s.dx ? 3.0 : 2.0) : 1.0;
  const double flops = products * 2.0 * 64.0 * double(s.Cout) * double(s.H * s.H) * double(s.C * 9);
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_pct"] = 100.0 * (flops * 1e-9 * double(state.iterations()) /
                                        double(state.counters["elapsed_s"])) / fma_peak();
  state.counters["threads"] = omp_get_max_threads();
}

// The direct convolution (kernels/conv.h) on channels-last activations, as inside a model.
void run_conv_direct(benchmark::State& state, const ConvCase& s, bool backward) {
  const hddp::ConvShape g{64, s.C, s.H, s.H, s.Cout, 3, 1};
  Rng rng(2);
  auto fill = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
    return v;
  };
  const int64_t P = s.H * s.H;
  const std::vector<float> x = fill(64 * s.C * P), w = fill(s.Cout * s.C * 9), b = fill(s.Cout), dy = fill(64 * s.Cout * P);
  std::vector<float> y(size_t(64 * s.Cout * P)), dx(x.size()), dw(w.size()), db(b.size());
  std::vector<float> scratch(size_t(std::max(conv_direct_forward_scratch(g), conv_direct_backward_scratch(g))));
  const auto nhwc = ImageLayout::NHWC;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    conv_direct_forward(g, nhwc, nhwc, x.data(), w.data(), b.data(), false, y.data(), scratch.data());
    if (backward)
      conv_direct_backward(g, nhwc, nhwc, x.data(), w.data(), dy.data(), nullptr, s.dx ? dx.data() : nullptr,
                           dw.data(), db.data(), false, scratch.data());
    benchmark::ClobberMemory();
  }
  state.counters["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report_conv(state, s, backward);
}

void run_conv(benchmark::State& state, const ConvCase& s, bool backward, GemmBackend backend) {
  set_gemm_backend(backend);
  const int64_t B = 64, k = 3, pad = 1, H = s.H, W = s.H, P = H * W, ckk = s.C * k * k;
  Rng rng(2);
  auto fill = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
    return v;
  };
  const std::vector<float> x = fill(B * s.C * P), w = fill(s.Cout * ckk), b = fill(s.Cout), dy = fill(B * s.Cout * P);
  std::vector<float> y(size_t(B * s.Cout * P)), dx(x.size()), dw(w.size()), db(b.size());
  std::vector<float> scratch(size_t(conv2d_scratch_size(B, s.C, H, W, s.Cout, k, 1, pad)));
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    conv2d_forward(B, s.C, H, W, s.Cout, k, 1, pad, x.data(), w.data(), b.data(), y.data(), scratch.data());
    if (backward)
      conv2d_backward(B, s.C, H, W, s.Cout, k, 1, pad, x.data(), w.data(), dy.data(), s.dx ? dx.data() : nullptr,
                      dw.data(), db.data(), scratch.data(), false);
    benchmark::ClobberMemory();
  }
  state.counters["elapsed_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report_conv(state, s, backward);
}

}  // namespace

int main(int argc, char** argv) {
  const Config configs[] = {
      {"tutorial", {Linear(1, 20), Linear(20, 1, false), Tanh()}, 32, 1e-3},
      {"wide", {Linear(1, 1024), Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1)}, 256, 1e-4},
      {"cnn",
       {Conv2d(1, 32, 3, 1, 1), ReLU(), MaxPool2d(2), Conv2d(32, 64, 3, 1, 1), ReLU(), MaxPool2d(2), Flatten(),
        Linear(3136, 128), ReLU(), Linear(128, 10)},
       64,
       1e-3,
       {1, 28, 28}},
  };
  const std::pair<const char*, GemmBackend> backends[] = {{"hddp", GemmBackend::Blocked},
                                                          {"openblas", GemmBackend::OpenBLAS}};
  for (const Config& c : configs)
    for (auto [bname, backend] : backends) {
      const std::string name = std::string("step/") + c.name + "/" + bname;
      benchmark::RegisterBenchmark(name.c_str(), [c, backend = backend](benchmark::State& st) { run_step(st, c, backend); })
          ->UseRealTime();
    }
  const ConvCase convs[] = {{"c1_1x28x28_to_32", 1, 28, 32, false}, {"c2_32x14x14_to_64", 32, 14, 64, true}};
  for (const ConvCase& s : convs)
    for (bool bwd : {false, true})
      for (auto [bname, backend] : backends) {
        const std::string name = std::string("conv/") + s.name + (bwd ? "/fwd+bwd/" : "/fwd/") + bname;
        benchmark::RegisterBenchmark(name.c_str(), [s, bwd, backend = backend](benchmark::State& st) {
          run_conv(st, s, bwd, backend);
        })->UseRealTime();
      }
  for (const ConvCase& s : convs)
    for (bool bwd : {false, true}) {
      const std::string name = std::string("conv/") + s.name + (bwd ? "/fwd+bwd/" : "/fwd/") + "direct";
      benchmark::RegisterBenchmark(name.c_str(), [s, bwd](benchmark::State& st) { run_conv_direct(st, s, bwd); })
          ->UseRealTime();
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("hddp_kernel", gemm_kernel_name());
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
