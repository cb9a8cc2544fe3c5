// A serial program on the installed package (no MPI): GEMM, a model, the data sampler.
#include <cstdio>

#include <hddp/core/model.h>
#include <hddp/data/sampler.h>
#include <hddp/core/rng.h>
#include <hddp/kernels/gemm.h>

int main() {
  const float A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8};
  float C[4] = {0, 0, 0, 0};
  hddp::gemm(hddp::Trans::No, hddp::Trans::No, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2);
  hddp::Rng rng(1, 0);
  hddp::Sequential<float> model({hddp::Linear(1, 4), hddp::Tanh(), hddp::Linear(4, 1)}, 8, rng);
  const float x[2] = {0.5f, -0.5f};
  const float* y = model.forward(std::span<const float>(x), 2);
  const std::vector<int64_t> order = hddp::DistributedSampler(10, 1, 0, 1, false).order(1);
  const bool ok = C[0] == 19 && C[1] == 22 && C[2] == 43 && C[3] == 50 && y[0] == y[0] && order.size() == 10 &&
                  order[9] == 9;
  std::printf("consumer: C = [%g %g; %g %g], %lld parameters: %s\n", C[0], C[1], C[2], C[3],
              (long long)model.num_params(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
