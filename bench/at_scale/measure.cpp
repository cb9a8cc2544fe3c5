// at_scale_measure: the replay's compute inputs measured on this machine (bench/at_scale).
// For a model ("wide": bench/mlp_1024x4.h, the MLP of bench_allreduce; or the tutorial's), at a
// batch per rank:
//   - per-layer backward times: the backward hook's timestamps (median over --reps steps);
//   - forward: the whole pass timed, split over the layers by their flop;
//   - other: the loss and the Adam step (the rest of a step);
//   - the reduction bandwidth: float `a += b` over 16 MiB, the work libnbc does per round.
// Writes the profile CSV (bench/at_scale/step_replay.h) and a config file for at_scale_replay
// (`other-ms`, `reduce-gbps`). --flop writes the flop profile instead (no timing).
#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "bench/at_scale/profile_args.h"
#include "bench/at_scale/step_replay.h"
#include "bench/mlp_1024x4.h"
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/kernels/gemm.h>

namespace {

using namespace hddp;
using Clock = std::chrono::steady_clock;

// The layers as profile rows: names "0", "1", ... (PyTorch's nn.Sequential), their parameter
// tensors, and each layer's forward flop at `batch` rows (Layer::flops: Linear 2 B in out + B out
// for the bias, an activation B width).
ModelProfile skeleton(const Sequential<float>& model, int64_t batch, std::vector<double>& flop) {
  ModelProfile m;
  for (size_t i = 0; i < model.num_layers(); ++i) {
    LayerProfile l;
    l.name = std::to_string(i);
    for (const ParamSpec& p : model.layer(i).parameters()) l.params.push_back(p.rows * p.cols);
    flop.push_back(model.layer(i).flops(batch));
    m.layers.push_back(l);
  }
  return m;
}

double reduce_bandwidth() {
  const size_t n = size_t(4) << 20;  // 16 MiB of floats
  std::vector<float> a(n, 1.0f), b(n, 0.5f);
  std::vector<double> t;
  for (int r = 0; r < 12; ++r) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
    t.push_back(seconds_since(t0));
  }
  volatile float sink = a[n / 2];  // the sums are used: the loop stays
  (void)sink;
  return double(n * sizeof(float)) / median(t);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("at_scale_measure: per-layer compute, the rest of a step and the reduction bandwidth, measured here, "
               "for at_scale_replay (bench/at_scale/README.md)");
  std::string model = "wide", profile_out, config_out;
  int64_t batch = 256;
  int reps = 20;
  bool flop = false;
  app.add_option("--model", model, "wide (1 -> 1024 x4 -> 1, bench_allreduce's) | tutorial (Linear(1,20) -> Linear(20,1) -> tanh)")
      ->capture_default_str()
      ->check(CLI::IsMember({"wide", "tutorial"}));
  app.add_option("--batch", batch, "rows per rank and step")->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--reps", reps, "timed steps (medians)")->capture_default_str()->check(CLI::Range(1, 100000));
  app.add_flag("--flop", flop, "write the flop profile (backward = 2x forward) instead of measured seconds");
  app.add_option("--profile-out", profile_out, "the profile CSV")->required();
  app.add_option("--config-out", config_out, "at_scale_replay config: other-ms, reduce-gbps (measured runs only)");
  if (const int rc = parse_args(app, argc, argv); rc >= 0) return rc;
  try {
    const std::vector<LayerSpec> layers = model == "wide" ? mlp_1024x4()
                                                          : std::vector<LayerSpec>{Linear(1, 20), Linear(20, 1, false), Tanh()};
    Rng rng(1);
    Sequential<float> net(layers, batch, rng);
    std::vector<double> flop_of;
    ModelProfile m = skeleton(net, batch, flop_of);
    double total_flop = 0;
    for (double f : flop_of) total_flop += f;
    if (flop) {
      m.flop = true;
      for (size_t i = 0; i < m.layers.size(); ++i) m.layers[i].forward = flop_of[i], m.layers[i].backward = 2 * flop_of[i];
      write_file_atomic(profile_out, model_profile_csv(m));
      std::printf("%s: %zu layers, %lld parameters, %.4g GFLOP per step (forward + backward) -> %s\n", model.c_str(),
                  m.layers.size(), (long long)m.num_params(), 3 * total_flop * 1e-9, profile_out.c_str());
      return 0;
    }
    set_gemm_backend(GemmBackend::Blocked);
    Adam<float> adam(net.num_params(), AdamHyper{.lr = 1e-4});
    std::vector<float> x(size_t(batch * net.in_features())), y(size_t(batch * net.out_features()));
    for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
    for (auto& v : y) v = rng.uniform(-0.9f, 0.9f);
    const size_t L = layers.size();
    std::vector<std::vector<double>> bwd(L);
    std::vector<double> fwd, other;
    Clock::time_point last;
    net.set_backward_hook([&](size_t i, int64_t) {
      const auto now = Clock::now();
      bwd[i].push_back(std::chrono::duration<double>(now - last).count());
      last = now;
    });
    hddp::MseLoss<float> mse(net.out_features());
    for (int r = -3; r < reps; ++r) {  // three warm-up steps
      net.zero_grad();
      auto t0 = Clock::now();
      const float* out = net.forward(x, batch);
      const double f = seconds_since(t0);
      t0 = Clock::now();
      const double loss = mse.forward(out, y.data(), batch);
      double o = seconds_since(t0);
      last = Clock::now();
      net.backward(mse.grad());
      t0 = Clock::now();
      adam.step(net.params(), net.grads());
      o += seconds_since(t0);
      if (loss != loss) std::fprintf(stderr, "at_scale_measure: the loss is NaN\n");
      if (r < 0) {
        for (auto& v : bwd) v.clear();
        continue;
      }
      fwd.push_back(f), other.push_back(o);
    }
    const double forward = median(fwd);
    for (size_t i = 0; i < L; ++i) {
      m.layers[i].forward = forward * flop_of[i] / total_flop;
      m.layers[i].backward = median(bwd[i]);
    }
    write_file_atomic(profile_out, model_profile_csv(m));
    const double bw = reduce_bandwidth();
    std::printf("%s, batch %lld, %d OpenMP threads, %s: forward %.4g ms, backward %.4g ms, other %.4g ms; "
                "reduction %.2f GB/s -> %s\n",
                model.c_str(), (long long)batch, omp_get_max_threads(), gemm_kernel_name(), forward * 1e3,
                (m.compute() - forward) * 1e3, median(other) * 1e3, bw * 1e-9, profile_out.c_str());
    if (!config_out.empty()) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "# at_scale_measure --model %s --batch %lld\nother-ms = %.6f\nreduce-gbps = %.4f\n",
                    model.c_str(), (long long)batch, median(other) * 1e3, bw * 1e-9);
      write_file_atomic(config_out, buf);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "at_scale_measure: %s\n", e.what());
    return 1;
  }
  return 0;
}
