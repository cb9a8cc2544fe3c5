// The GEMM-bound limit of poly_train's training step: the step's GEMMs alone, the same shapes,
// operands and calls as linear_forward / linear_backward make for `--hidden W[,W...]` at
// `--batch-size B` (Linear(1, W0), Linear(Wi-1, Wi) ..., Linear(Wn, 1, no bias)), timed with
// hddp::gemm on this process's OpenMP threads. Prints one JSON object: the median seconds per
// step over --reps repetitions, the step's GEMM flop and the rate.
//   bench/step_gemms --hidden 1024,1024 --batch-size 256 [--reps 20]
#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/kernels/gemm.h>

namespace {

struct Gemm {
  hddp::Trans ta, tb;
  int64_t M, N, K;
  bool accumulate;  // beta = 1 (parameter gradients accumulate, as in PyTorch)
};

// The calls of one step, in order: forward per Linear, then backward from the last layer.
std::vector<Gemm> step_gemms(const std::vector<int64_t>& widths, int64_t B) {
  using hddp::Trans;
  std::vector<Gemm> g;
  for (size_t l = 0; l + 1 < widths.size(); ++l)  // Y(B x out) = X(B x in) W^T
    g.push_back({Trans::No, Trans::Yes, B, widths[l + 1], widths[l], false});
  for (size_t l = widths.size() - 1; l-- > 0;) {
    const int64_t in = widths[l], out = widths[l + 1];
    if (l > 0) g.push_back({Trans::No, Trans::No, B, in, out, false});  // dX = dY W (not for layer 0)
    g.push_back({Trans::Yes, Trans::No, out, in, B, true});              // dW += dY^T X
  }
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"The GEMMs of poly_train's training step alone: its GEMM-bound limit"};
  std::vector<int64_t> hidden{1024, 1024};
  int64_t batch = 256;
  int reps = 20;
  app.add_option("--hidden", hidden, "hidden widths (as poly_train --hidden)")->delimiter(',')->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--batch-size", batch, "rows per step")->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  app.add_option("--reps", reps, "timed repetitions (median reported)")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);

  std::vector<int64_t> widths{1};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(1);
  const int64_t maxw = *std::max_element(widths.begin(), widths.end());
  // Operands the size of the largest layer's; values are irrelevant to the time but finite.
  std::vector<float> A(size_t(std::max(batch, maxw) * maxw), 0.01f), Bm(A), C(A);
  const std::vector<Gemm> calls = step_gemms(widths, batch);
  double flop = 0;
  for (const Gemm& g : calls) flop += 2.0 * double(g.M) * double(g.N) * double(g.K);

  auto run = [&] {
    for (const Gemm& g : calls) {
      const int64_t lda = g.ta == hddp::Trans::No ? g.K : g.M, ldb = g.tb == hddp::Trans::No ? g.N : g.K;
      hddp::gemm(g.ta, g.tb, g.M, g.N, g.K, 1.0f, A.data(), lda, Bm.data(), ldb, g.accumulate ? 1.0f : 0.0f,
                 C.data(), g.N);
    }
  };
  run();  // warm-up: packing buffers, thread team
  std::vector<double> t(static_cast<size_t>(reps));
  for (double& s : t) {
    const auto t0 = std::chrono::steady_clock::now();
    run();
    s = hddp::seconds_since(t0);
  }
  std::sort(t.begin(), t.end());
  const double med = t[t.size() / 2];
  std::printf("{\"gemm_s\": %.9g, \"gflop\": %.6g, \"gflops\": %.4g, \"threads\": %d, \"kernel\": \"%s\", \"calls\": %zu}\n",
              med, flop * 1e-9, flop * 1e-9 / med, omp_get_max_threads(), hddp::gemm_kernel_name(), calls.size());
  return 0;
}
