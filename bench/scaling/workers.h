#pragma once
// bench/scaling's measurement workers: the orchestrator (main.cpp) starts this same program
// as `scaling --worker KIND ...`, one process per thread count (OMP_NUM_THREADS and the
// placement variables are read at process start), or under mpiexec for the rank sweeps.
// Workers print "@row key=value ..." lines (common.h).
//
//   gemm  one round of every GEMM shape x backend: time per call (loop for --min-time s)
//   step  one round of the wide-MLP training step per GEMM backend
//   ddp   (under mpiexec) the wide-MLP step data-parallel: one model per bucket cap, steps in
//         rotating order after a barrier each; rank 0 prints per-rank medians
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm_backends.h>

namespace scaling {

// The wide MLP of bench/bench_layers: 1 -> 1024 -> 1024 -> 1024 -> 1, tanh between, batch
// 256 per rank, Adam lr 1e-4 (2.10 M parameters; 3.23 GFLOP of GEMM per step).
std::vector<hddp::LayerSpec> wide_layers();
inline constexpr int64_t kWideBatch = 256;
inline constexpr double kWideLr = 1e-4;
double gemm_flops_per_step(const std::vector<hddp::LayerSpec>& layers, int64_t batch);

struct GemmShape {
  std::string name;  // fwd, dx, dw, sq2048 or MxNxK:TT
  int64_t M = 0, N = 0, K = 0;
  std::string trans;  // NN, NT or TN
};
// fwd: the wide MLP's forward Y = X W^T (256,1024,1024) NT; dx: dX = dY W (256,1024,1024) NN;
// dw: dW = dY^T X (1024,1024,256) TN; sq2048: 2048^3 NN; or "MxNxK[:NN|NT|TN]".
GemmShape parse_shape(const std::string& s);  // throws UsageError

int worker_main(int argc, char** argv);  // argv[1] == "--worker"

}  // namespace scaling
