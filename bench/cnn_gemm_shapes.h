#pragma once
// The GEMM products of one training step of the Fashion-MNIST CNN, batch 64 (Conv2d(1,32,3,pad 1)
// ReLU MaxPool2d(2) Conv2d(32,64,3,pad 1) ReLU MaxPool2d(2) Flatten Linear(3136,128) ReLU
// Linear(128,10)), row-major, pixels as rows: a convolution's weights W are Cout x Cin*k*k and
// cols is B*OH*OW x Cin*k*k:
//   forward  Y = cols W^T   (NT, M = B*OH*OW)     weight gradient dW = dY^T cols (TN, M = Cout)
//   input gradient dcols = dY W (NN)
// Linear(3136,128) as Y = X W^T, dX = dY W, dW = dY^T X. core/conv.cpp runs the same products
// transposed (channels as rows: Y^T = W cols^T), the same arithmetic with M and N swapped.
// bench_gemm times them (gemm/<backend>/s/<op>/<MxNxK>/<name>); test_gemm checks them.
#include <cstdint>

#include <hddp/kernels/gemm.h>

namespace hddp::bench {

struct CnnProduct {
  const char* name;
  Trans ta, tb;
  int64_t M, N, K;
};
inline constexpr CnnProduct kCnnProducts[] = {
    {"conv1_fwd", Trans::No, Trans::Yes, 50176, 32, 9},   {"conv1_dw", Trans::Yes, Trans::No, 32, 9, 50176},
    {"conv2_fwd", Trans::No, Trans::Yes, 12544, 64, 288}, {"conv2_dw", Trans::Yes, Trans::No, 64, 288, 12544},
    {"conv2_dx", Trans::No, Trans::No, 12544, 288, 64},   {"fc1_fwd", Trans::No, Trans::Yes, 64, 128, 3136},
    {"fc1_dx", Trans::No, Trans::No, 64, 3136, 128},      {"fc1_dw", Trans::Yes, Trans::No, 128, 3136, 64},
};

}  // namespace hddp::bench
