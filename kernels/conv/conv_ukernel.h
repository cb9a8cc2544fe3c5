#pragma once
// The direct convolution's micro-kernel: one batch-reduce GEMM (Georganas et al., SC'18; oneDNN's
// brgemm), the only instruction-set-specific piece of the convolution. One file per set, each the
// only file built with its flags, all three expanding the one template of conv_ukernel_impl.h:
//   conv_portable.cpp  plain C++, any CPU
//   conv_avx2.cpp      AVX2+FMA
//   conv_avx512.cpp    AVX-512F
// and for bf16 products conv_avx512bf16.cpp (AVX512_BF16) and conv_amx.cpp (AMX tiles: the tile
// program of conv_amx_program.h; the same program on the tile model in conv.cpp).
//
// One call computes an MR x (NV*L) tile
//   acc(i, j) = sum over t < n, p < k[t] of  A_t(i, p) * B_t(p, j)
//   A_t(i, p) = a[t][i * rsa + p * csa]      (inputs read in place: a row of pixels, or a gradient's
//   B_t(p, j) = b[t][p * ldb + j]             (kj, ci) rows; B: re-blocked weights or padded dY)
// with every B row readable for NV*L lanes, then stores
//   c[i * ldc + j] = relu?( (accumulate ? c[i * ldc + j] : 0) + acc(i, j) + (bias ? bias[j] : 0) )
// for j < N (the last vector's lanes past N are neither read nor written in c; bias holds NV*L
// values). The A operand comes in three orders: along p contiguous (csa = 1: pixels x channels,
// the forward and the input gradient), along i contiguous (rsa = 1: the weight gradient's
// (kj, ci) rows), or row i at its own offset off[i] (A_t(i, p) = a[t][off[i] + p * csa]: the
// weight gradient of a layer with few input channels, every tap (ki, kj, ci) a row).
#include <cstdint>

#include <hddp/kernels/conv.h>
#include <hddp/kernels/conv/conv_blocking.h>

namespace hddp::detail {

struct BrgemmCall {
  int64_t n = 0;                     // products summed
  const float* const* a = nullptr;   // n pointers
  const float* const* b = nullptr;   // n pointers
  const int64_t* k = nullptr;        // n lengths
  int64_t rsa = 0, csa = 0, ldb = 0;
  const int64_t* off = nullptr;      // order 2: MR row offsets
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t N = 0;                     // columns stored: (NV - 1) * L < N <= NV * L
  bool accumulate = false;
  const float* bias = nullptr;
  bool relu = false;
};

using BrgemmKernel = void (*)(const BrgemmCall&);

// kernel[order][nv - 1][mr - 1]; order 0: csa == 1, 1: rsa == 1, 2: row offsets. nullptr past the
// set's table row.
enum AOrder { kAlongP = 0, kAlongI = 1, kRowOffsets = 2 };
struct ConvKernels {
  const ConvBlocking* blocking;
  BrgemmKernel kernel[3][kConvMaxNV][kConvMaxMR];
};

// The bf16 twin (AVX512_BF16, conv_avx512bf16.cpp): the same tile and store, A and B as
// bf16 over k pairs. A_t(i, pair q) = the two values at a[t] + i * rsa + 2q (the order kAlongP
// only: the forward and the input gradient); B_t's pair row q at b[t] + q * ldb holds NV*L
// columns as (k = 2q, k = 2q + 1) pairs, 2 * NV*L values; k[t] counts pairs.
struct BrgemmCall16 {
  int64_t n = 0;
  const uint16_t* const* a = nullptr;
  const uint16_t* const* b = nullptr;
  const int64_t* k = nullptr;  // pairs per product
  int64_t rsa = 0, ldb = 0;    // in bf16 values
  float* c = nullptr;
  int64_t ldc = 0;
  int64_t N = 0;
  bool accumulate = false;
  const float* bias = nullptr;
  bool relu = false;
};
using BrgemmKernel16 = void (*)(const BrgemmCall16&);
// kernel[nv - 1][mr - 1], with the blocking of the avx512 row of kConvBlocking.
struct ConvKernels16 {
  const ConvBlocking* blocking;
  BrgemmKernel16 kernel[kConvMaxNV][kConvMaxMR];
};
const ConvKernels16& conv_kernels_avx512bf16();  // call only where cpu_has_avx512_bf16()

// The AMX batch-reduce GEMM (conv_amx.cpp; its twin on the tile model in conv.cpp): one
// 32 x 32 float block over the tiles' roles plan (amx/amx_tiles.h),
//   out(i, j) (+)= sum over t < n, kb < kb[t], p < 32 of  A_t(i, 32 kb + p) * B_t(32 kb + p, j)
//   A_t(i, p) = a[t][i * lda + p]                    bf16, any row stride (the tile loads' stride)
//   B_t(p, j) = b[t][(p / 2) * ldb + 2 j + p % 2]    bf16 in pairs of k rows, ldb values a pair row
// out: 32 x 32 floats, rows 32 apart; accumulate: out is loaded and summed onto. The loops
// (conv.cpp) read A in place in padded images whose pixels are rows, so every row and column
// of the block is computed; they store the ones inside the output.
struct AmxCall {
  int64_t n = 0;
  const uint16_t* const* a = nullptr;
  const uint16_t* const* b = nullptr;
  const int64_t* kb = nullptr;  // blocks of 32 k per product
  int64_t lda = 0, ldb = 0;
  float* out = nullptr;
  bool accumulate = false;
};
using AmxBrgemm = void (*)(const AmxCall&);
const AmxBrgemm& conv_amx();        // call only where amx_permission_error() is ""
const AmxBrgemm& conv_amx_model();  // the same program on the tile model (any CPU; tests)

// The kernels bf16 products take (conv.h): chosen once from the bf16 unit (units.h): Amx where
// it is AMX, Avx512Bf16 where it is AVX512_BF16 and the set is avx512, else Float (no bf16 unit
// beats the float FMA here: the products run in float). Passes and shapes the chosen path does
// not take run in float too (conv_bf16_passes).
enum class ConvBf16Path { Float, Avx512Bf16, Amx, AmxModel };
ConvBf16Path conv_bf16_path();
const char* to_string(ConvBf16Path p);  // "float", "avx512bf16", "amx", "amx-model"
// Tests and benchmarks run the paths side by side: forces one (AmxModel on any CPU; Amx and
// Avx512Bf16 only where they run) until set again. Not while a convolution runs.
void set_conv_bf16_path(ConvBf16Path p);
void clear_conv_bf16_path();  // back to the chosen path
// Which passes of shape s the path takes (the others run the float kernels on float operands):
//   Amx         forward where k*C fills whole tiles of 32; input gradient always (k * Cout rounded
//               to 32); weight gradient where C does (a first layer of one channel would fill
//               1 of a tile's 32 rows, so it stays float)
//   Avx512Bf16  forward where k*C is even, input gradient where k * Cout (to 16) is; no weight
//               gradient
//   Float       none
struct ConvBf16Passes {
  bool forward = false, input_gradient = false, weight_gradient = false;
};
ConvBf16Passes conv_bf16_passes(const ConvShape& s);
// Whether the scratch sizes hold the AMX operands: where AMX could be the path (a CPU with AMX,
// or AMX forced), without running the unit probe for a float run.
bool conv_amx_scratch();

const ConvKernels& conv_kernels_portable();
const ConvKernels& conv_kernels_avx2();    // call only where cpu_has_avx2_fma()
const ConvKernels& conv_kernels_avx512();  // call only where cpu_has_avx512()

// The set the convolution runs, chosen on first use (cpu_isa.h: HDDP_CONV_KERNEL, else the
// widest); conv_bf16_path() says what bf16 products run on.
const ConvKernels& conv_kernels();

}  // namespace hddp::detail
