// One full training step (zero_grad, forward, MSE loss, backward, Adam step) of
//   tutorial: Linear(1,20) -> Linear(20,1, no bias) -> Tanh, batch 32 (61 parameters)
//   wide:     1 -> 1024 -> 1024 -> 1024 -> 1 with Tanh between, batch 256 (2.1 M parameters)
// with hddp's GEMM (GemmBackend::Blocked) and OpenBLAS (GemmBackend::OpenBLAS).
// Names: step/<model>/<hddp|openblas>. Threads come from OMP_NUM_THREADS. The input batch is
// fixed (drawing samples is not part of the step). Goal: step/tutorial/hddp <= 5 us on one core.
//   OMP_NUM_THREADS=1 build/bench/bench_layers --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>

#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/kernels/gemm.h>

namespace {

using namespace hddp;

struct Config {
  const char* name;
  std::vector<LayerSpec> layers;
  int64_t batch;
  double lr;  // the wide model diverges at 1e-3 over thousands of steps on one fixed batch
};

void run_step(benchmark::State& state, const Config& cfg, GemmBackend backend) {
  set_gemm_backend(backend);
  Rng rng(1);
  Sequential<float> model(cfg.layers, cfg.batch, rng);
  Adam<float> adam(model.num_params(), {.lr = cfg.lr});
  const int64_t in = model.in_features(), out = model.out_features();
  std::vector<float> x(size_t(cfg.batch * in)), y(size_t(cfg.batch * out));
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : y) v = rng.uniform(-0.9f, 0.9f);
  float loss = 0;
  for (auto _ : state) {
    model.zero_grad();
    model.forward(x.data(), cfg.batch);
    loss = model.loss(y.data());
    model.backward(y.data());
    adam.step(model.params(), model.grads());
    benchmark::DoNotOptimize(loss);
    benchmark::ClobberMemory();
  }
  // GEMM work per step: forward X·W^T, backward dY·W and dY^T·X: 3 x 2·B·in·out per Linear.
  double flops = 0;
  for (size_t i = 0; i < model.num_layers(); ++i)
    if (const auto* l = dynamic_cast<const layers::Linear<float>*>(&model.layer(i)))
      flops += 6.0 * double(cfg.batch) * double(l->in()) * double(l->out());
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params"] = double(model.num_params());
  state.counters["threads"] = omp_get_max_threads();
  state.counters["loss"] = loss;  // the last step's: finite, i.e. the timed arithmetic is normal
}

}  // namespace

int main(int argc, char** argv) {
  const Config configs[] = {
      {"tutorial", {Linear(1, 20), Linear(20, 1, false), Tanh()}, 32, 1e-3},
      {"wide", {Linear(1, 1024), Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1)}, 256, 1e-4},
  };
  const std::pair<const char*, GemmBackend> backends[] = {{"hddp", GemmBackend::Blocked},
                                                          {"openblas", GemmBackend::OpenBLAS}};
  for (const Config& c : configs)
    for (auto [bname, backend] : backends) {
      const std::string name = std::string("step/") + c.name + "/" + bname;
      benchmark::RegisterBenchmark(name.c_str(), [c, backend = backend](benchmark::State& st) { run_step(st, c, backend); })
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
