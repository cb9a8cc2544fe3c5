#pragma once
// The direct convolution's blocking: one table, one row per instruction set.
//
// A micro-tile is MR output rows (pixels, or the (kj, ci) rows of a weight gradient) by NV
// vectors of L lanes (output channels), MR x NV accumulators held in registers for the whole
// batch-reduce (conv_ukernel.h). `mr[nv - 1]` is the largest MR the set has for NV vectors:
// the accumulators, the NV vectors of the current B row and one broadcast fit the register file
// (AVX-512: 32 zmm, 14 x 2 = 28 + 2 + 1. AVX2: 16 ymm, 6 x 2 = 12 + 2 + 1).
// conv.cpp picks, per pass and shape, the NV and MR that keep the most accumulators busy over
// the tiles a row actually splits into (at the CNN's shapes 14 x 2 everywhere on AVX-512: rows of
// 14 and 28 pixels, 32 and 64 channels).
//
// The weight gradient sums over the batch: images go in kConvWeightChunks fixed chunks (a
// function of the batch alone), each chunk's partial sum in registers then in its own buffer,
// the chunks added in order; so the result is bitwise the same for any thread count, and a
// chunk's images (at most 4 of the CNN's 64 per chunk) stay in L2 while every tile reads them.
#include <cstdint>
#include <string_view>

namespace hddp::detail {

inline constexpr int kConvMaxNV = 4;
inline constexpr int kConvMaxMR = 14;
inline constexpr int64_t kConvWeightChunks = 16;

struct ConvBlocking {
  std::string_view isa;
  int L;                // lanes of one vector (floats)
  int nv;               // largest NV
  int mr[kConvMaxNV];   // largest MR for NV = 1..nv
};

// Two vectors at most: at 32 channels and more the 14 x 2 tile keeps 28 accumulators busy, and
// each (MR, NV) pair is a compiled kernel per A order (the AVX-512 file's compile time grows with
// them). The portable set only has to be right.
inline constexpr ConvBlocking kConvBlocking[] = {
    {"avx512", 16, 2, {14, 14, 0, 0}},
    {"avx2", 8, 2, {12, 6, 0, 0}},
    {"portable", 8, 2, {4, 2, 0, 0}},
};

}  // namespace hddp::detail
