// One full training step (zero_grad, forward, MSE loss, backward, Adam step) of
//   tutorial: Linear(1,20) -> Linear(20,1, no bias) -> Tanh, batch 32 (61 parameters)
//   wide:     1 -> 1024 -> 1024 -> 1024 -> 1 with Tanh between, batch 256 (2.1 M parameters)
//   cnn:      (1, 28, 28) -> Conv2d(1,32,3,pad 1) ReLU MaxPool2d(2) -> Conv2d(32,64,3,pad 1) ReLU
//             MaxPool2d(2) -> Flatten -> Linear(3136,128) ReLU -> Linear(128,10), batch 64, an MSE
//             target of 10 outputs (softmax cross-entropy is not part of Sequential) (421 k parameters)
// and one Conv2d alone at the CNN's two shapes, batch 64 (core/conv.h's kernels):
//   conv/c1_1x28x28_to_32/fwd, .../fwd+bwd   the first: dW and db, no dX (the first layer needs none)
//   conv/c2_32x14x14_to_64/fwd, .../fwd+bwd  the second: dW, db and dX
// on the direct kernels (what Conv2d runs in float: kernels/conv.h, channels-last) and through
// im2col over hddp's GEMM (GemmBackend::Blocked) and over OpenBLAS (GemmBackend::OpenBLAS); and
// step/cnn/products: the CNN step's convolutions and GEMMs alone, the bound its step is measured
// against. step/<model>/openblas runs the Linear layers' GEMMs on OpenBLAS (the convolutions
// stay direct).
// step/<model>/hddp-bf16 and conv/<shape>/<pass>/hddp-bf16: the same with the products in bf16
// (Precision::Bf16) on the unit chosen for this CPU (kernels/units.h); conv/<shape>/<pass>/
// hddp-bf16-<path>: the convolution on each bf16 path this CPU runs (float: the float kernels on
// rounded operands; avx512bf16; amx), side by side.
// Names: step/<model>/<hddp|openblas|hddp-bf16>, conv/<shape>/<pass>/<hddp|hddp-bf16|im2col|openblas>; peak_pct is
// the rate over the FMA probe (bench/peak) at the same thread count. Threads come from
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
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/kernels/conv.h>
#include <hddp/kernels/conv/conv_ukernel.h>
#include <hddp/kernels/cpu_isa.h>
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

// The FMA probe of this machine at the run's thread count (bench/peak), measured once.
double fma_peak() {
  static const double peak = bench::fma_peak_gflops(bench::widest_isa(), false, omp_get_max_threads());
  return peak;
}

void run_step(benchmark::State& state, const Config& cfg, GemmBackend backend, Precision precision = Precision::Float) {
  set_gemm_backend(backend);
  hddp::detail::clear_conv_bf16_path();  // the chosen path (a conv/.../hddp-bf16-<path> row may have run before)
  Rng rng(1);
  Sequential<float> model = cfg.input.empty() ? Sequential<float>(cfg.layers, cfg.batch, rng)
                                               : Sequential<float>(cfg.input, cfg.layers, cfg.batch, rng);
  model.set_precision(precision);
  Adam<float> adam(model.num_params(), {.lr = cfg.lr});
  const int64_t in = model.in_features(), out = model.out_features();
  std::vector<float> x(size_t(cfg.batch * in)), y(size_t(cfg.batch * out));
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : y) v = rng.uniform(-0.9f, 0.9f);
  MseLoss<float> mse(out);
  double loss = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    model.zero_grad();
    loss = mse.forward(model.forward(x, cfg.batch), y.data(), cfg.batch);
    model.backward(mse.grad());
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
  state.counters["peak_pct"] = 100.0 * flops * 1e-9 * double(state.iterations()) /
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / fma_peak();
  state.counters["params"] = double(model.num_params());
  state.counters["threads"] = omp_get_max_threads();
  state.counters["loss"] = loss;  // the last step's: finite, i.e. the timed arithmetic is normal
}

// The CNN step's products alone, the bound its whole step is measured against: both
// convolutions forward and backward on the direct kernels (c1 without dX) and the two Linear
// layers' three GEMMs each, on the step's shapes, nothing else.
void run_cnn_products(benchmark::State& state) {
  set_gemm_backend(GemmBackend::Blocked);
  const int64_t B = 64;
  const hddp::ConvShape c1{B, 1, 28, 28, 32, 3, 1}, c2{B, 32, 14, 14, 64, 3, 1};
  Rng rng(3);
  auto fill = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = rng.uniform(-1.0f, 1.0f);
    return v;
  };
  auto x1 = fill(B * 784), w1 = fill(32 * 9), b1 = fill(32), y1 = fill(B * 784 * 32), dw1 = fill(32 * 9), db1 = fill(32);
  auto x2 = fill(B * 196 * 32), w2 = fill(64 * 288), b2 = fill(64), y2 = fill(B * 196 * 64), dx2 = fill(B * 196 * 32),
       dw2 = fill(64 * 288), db2 = fill(64);
  auto h = fill(B * 3136), W3 = fill(128 * 3136), a3 = fill(B * 128), W4 = fill(10 * 128), a4 = fill(B * 10),
       dW3 = fill(128 * 3136), dh = fill(B * 3136), dW4 = fill(10 * 128), da3 = fill(B * 128);
  std::vector<float> scratch(size_t(std::max({conv_direct_forward_scratch(c1), conv_direct_backward_scratch(c1),
                                              conv_direct_forward_scratch(c2), conv_direct_backward_scratch(c2)})));
  const auto nhwc = ImageLayout::NHWC;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    conv_direct_forward(c1, nhwc, nhwc, x1.data(), w1.data(), b1.data(), true, y1.data(), scratch.data());
    conv_direct_forward(c2, nhwc, nhwc, x2.data(), w2.data(), b2.data(), true, y2.data(), scratch.data());
    gemm(Trans::No, Trans::Yes, B, 128, 3136, 1.0f, h.data(), 3136, W3.data(), 3136, 0.0f, a3.data(), 128);
    gemm(Trans::No, Trans::Yes, B, 10, 128, 1.0f, a3.data(), 128, W4.data(), 128, 0.0f, a4.data(), 10);
    gemm(Trans::Yes, Trans::No, 10, 128, B, 1.0f, a4.data(), 10, a3.data(), 128, 1.0f, dW4.data(), 128);
    gemm(Trans::No, Trans::No, B, 128, 10, 1.0f, a4.data(), 10, W4.data(), 128, 0.0f, da3.data(), 128);
    gemm(Trans::Yes, Trans::No, 128, 3136, B, 1.0f, da3.data(), 128, h.data(), 3136, 1.0f, dW3.data(), 3136);
    gemm(Trans::No, Trans::No, B, 3136, 128, 1.0f, da3.data(), 128, W3.data(), 3136, 0.0f, dh.data(), 3136);
    conv_direct_backward(c2, nhwc, nhwc, x2.data(), w2.data(), y2.data(), y2.data(), dx2.data(), dw2.data(), db2.data(),
                         true, scratch.data());
    conv_direct_backward(c1, nhwc, nhwc, x1.data(), w1.data(), y1.data(), y1.data(), nullptr, dw1.data(), db1.data(),
                         true, scratch.data());
    benchmark::ClobberMemory();
  }
  // As run_step counts: 3 products per layer, c1's input gradient included though not computed.
  const double flops = 6.0 * B * (3136.0 * 128 + 128.0 * 10) + 6.0 * B * (784.0 * 32 * 9 + 196.0 * 64 * 288);
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_pct"] = 100.0 * flops * 1e-9 * double(state.iterations()) /
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / fma_peak();
  state.counters["threads"] = omp_get_max_threads();
}

// One Conv2d, 3x3 pad 1 stride 1, batch B: forward, or forward and backward (with dX or not).
struct ConvCase {
  const char* name;
  int64_t C, H, Cout;
  bool dx;
};

void report_conv(benchmark::State& state, const ConvCase& s, bool backward) {
  const double products = backward ? (s.dx ? 3.0 : 2.0) : 1.0;
  const double flops = products * 2.0 * 64.0 * double(s.Cout) * double(s.H * s.H) * double(s.C * 9);
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_pct"] = 100.0 * (flops * 1e-9 * double(state.iterations()) /
                                        double(state.counters["elapsed_s"])) / fma_peak();
  state.counters["threads"] = omp_get_max_threads();
}

// The direct convolution (kernels/conv.h) on channels-last activations, as inside a model.
void run_conv_direct(benchmark::State& state, const ConvCase& s, bool backward, bool bf16 = false,
                     const hddp::detail::ConvBf16Path* path = nullptr) {
  if (path) hddp::detail::set_conv_bf16_path(*path);
  else hddp::detail::clear_conv_bf16_path();
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
    conv_direct_forward(g, nhwc, nhwc, x.data(), w.data(), b.data(), false, y.data(), scratch.data(), 0, nullptr, bf16);
    if (backward)
      conv_direct_backward(g, nhwc, nhwc, x.data(), w.data(), dy.data(), nullptr, s.dx ? dx.data() : nullptr,
                           dw.data(), db.data(), false, scratch.data(), 0, nullptr, bf16);
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
  // One Conv2d: the direct kernels (what Conv2d runs in float), and im2col over each GEMM.
  const std::pair<const char*, GemmBackend> im2col[] = {{"im2col", GemmBackend::Blocked},
                                                        {"openblas", GemmBackend::OpenBLAS}};
  for (const Config& c : configs)
    for (auto [bname, backend] : backends) {
      const std::string name = std::string("step/") + c.name + "/" + bname;
      benchmark::RegisterBenchmark(name.c_str(), [c, backend = backend](benchmark::State& st) { run_step(st, c, backend); })
          ->UseRealTime();
    }
  // The same steps with the products in bf16 (Sequential::set_precision), hddp's GEMM.
  for (const Config& c : configs) {
    const std::string name = std::string("step/") + c.name + "/hddp-bf16";
    benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& st) {
      run_step(st, c, GemmBackend::Blocked, Precision::Bf16);
    })->UseRealTime();
  }
  benchmark::RegisterBenchmark("step/cnn/products", run_cnn_products)->UseRealTime();
  const ConvCase convs[] = {{"c1_1x28x28_to_32", 1, 28, 32, false}, {"c2_32x14x14_to_64", 32, 14, 64, true}};
  for (const ConvCase& s : convs)
    for (bool bwd : {false, true})
      for (auto [bname, backend] : im2col) {
        const std::string name = std::string("conv/") + s.name + (bwd ? "/fwd+bwd/" : "/fwd/") + bname;
        benchmark::RegisterBenchmark(name.c_str(), [s, bwd, backend = backend](benchmark::State& st) {
          run_conv(st, s, bwd, backend);
        })->UseRealTime();
      }
  for (const ConvCase& s : convs)
    for (bool bwd : {false, true}) {
      const std::string name = std::string("conv/") + s.name + (bwd ? "/fwd+bwd/" : "/fwd/") + "hddp";
      benchmark::RegisterBenchmark(name.c_str(), [s, bwd](benchmark::State& st) { run_conv_direct(st, s, bwd); })
          ->UseRealTime();
      benchmark::RegisterBenchmark((name + "-bf16").c_str(), [s, bwd](benchmark::State& st) {
        run_conv_direct(st, s, bwd, true);
      })->UseRealTime();
    }
  using hddp::detail::ConvBf16Path;
  std::vector<ConvBf16Path> paths{ConvBf16Path::Float};
  if (hddp::detail::cpu_has_avx512_bf16() && hddp::detail::conv_kernels().blocking->isa == "avx512")
    paths.push_back(ConvBf16Path::Avx512Bf16);
  if (hddp::detail::cpu_has_amx_bf16() && hddp::detail::amx_permission_error().empty())
    paths.push_back(ConvBf16Path::Amx);
  for (const ConvCase& s : convs)
    for (bool bwd : {false, true})
      for (ConvBf16Path path : paths) {
        const std::string name = std::string("conv/") + s.name + (bwd ? "/fwd+bwd/" : "/fwd/") + "hddp-bf16-" +
                                 hddp::detail::to_string(path);
        benchmark::RegisterBenchmark(name.c_str(), [s, bwd, path](benchmark::State& st) {
          run_conv_direct(st, s, bwd, true, &path);
        })->UseRealTime();
      }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("hddp_kernel", gemm_kernel_name());
  benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
