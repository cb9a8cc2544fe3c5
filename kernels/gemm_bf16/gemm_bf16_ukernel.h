#pragma once
// The instruction-set-specific pieces of gemm_bf16 (gemm_bf16.h), one file per set, each the
// only file built with its flags:
//   gemm_bf16_avx512bf16.cpp  AVX512_BF16 micro-kernel (-mavx512f -mavx512bf16)
//   gemm_bf16_amx.cpp         AMX tile micro-kernel (-mamx-tile -mamx-bf16 -mavx512f)
//   gemm_bf16_portable.cpp    no micro-kernel: the inputs rounded, then the float gemm()
// gemm_bf16.cpp holds the loops around the micro-kernels (five, as gemm_blocked), the choice of
// a set and a C++ model of the AMX tile unit; gemm_bf16_naive.cpp the naive twin. The blocking
// is gemm/gemm_blocking.h's. Values travel as raw bf16 bit patterns (uint16_t).
//
// Packed layouts (k padded with zeros to a multiple of the set's KU, rows/columns past the
// matrix to MR/NR):
//   B micro-panel, pairs:  b[(p*NR + j)*2 + e] = op(B)(2p + e, j)   -- the layout vdpbf16ps
//     and the AMX tile product read: one 32-bit word holds two consecutive k of a column.
//   A micro-panel, pairs:  a[(p*MR + i)*2 + e] = op(A)(i, 2p + e)   (AVX512_BF16: one word
//     broadcast per row)
//   A micro-panel, rows:   a[(kb*MR + i)*32 + t] = op(A)(i, 32kb + t) (AMX: a 16-row tile of
//     32 k per load, 64 bytes per row)
#include <algorithm>
#include <cstdint>
#include <cstring>

#include <hddp/kernels/bf16.h>
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_blocking.h>

namespace hddp::detail {

// Pack w <= W lines of op(X) (line i, k: X[i*rs + k*cs]) over k < kc into a panel of W lines
// and kpad k (zeros beyond): the pairs layout, or AMX's rows of 32.
template <class S>
using PackFn = void (*)(const S* X, int64_t rs, int64_t cs, int64_t w, int64_t W, int64_t kc, int64_t kpad,
                        uint16_t* dst);

// The MR x NR tile at c (row stride ldc) becomes alpha * (a . b) + beta * c (beta == 0: c is not
// read), over kpad (a multiple of KU) packed k. A as packed (AMX: a_rs 32, a_ks MR * 32), or, where
// the set reads A in place (a_in_place below), rows a_rs values apart, 32 k a_ks = 32 further.
using Bf16UKernel = void (*)(int64_t kpad, const uint16_t* a, int64_t a_rs, int64_t a_ks, const uint16_t* b,
                             float alpha, float beta, float* c, int64_t ldc);

// A set; the portable one has no micro-kernel (ukernel nullptr: gemm_bf16_portable runs it).
struct Bf16Kernels {
  const char* name;
  Bf16Blocking blocking;
  Bf16UKernel ukernel;
  PackFn<float> pack_a_f, pack_b_f;
  PackFn<uint16_t> pack_a_h, pack_b_h;
  // bf16 A with rows contiguous in k is read in place (the tiles load any row stride): whole
  // MR-row panels over a kc of whole KU blocks; the rest is packed.
  bool a_in_place = false;
};

const Bf16Kernels& gemm_bf16_kernels_amx();         // call only where amx_permission_error() is ""
const Bf16Kernels& gemm_bf16_kernels_avx512bf16();  // call only where cpu_has_avx512_bf16()
const Bf16Kernels& gemm_bf16_kernels_portable();
// The AMX set with its tile instructions replaced by a plain C++ model of them (same packing,
// same tile addressing): checks the AMX loops' addressing on any CPU. Slow; for tests.
const Bf16Kernels& amx_model_kernels();

// gemm_bf16 on a given set (tests and benchmarks run the sets side by side).
template <class S>
void gemm_bf16_with(const Bf16Kernels& k, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const S* A, int64_t lda, const S* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The portable set: op(A) and op(B) rounded into float copies, then the float gemm().
template <class S>
void gemm_bf16_portable(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t lda,
                        const S* B, int64_t ldb, float beta, float* C, int64_t ldc);
// The naive twin: C = alpha * sum_k round(A) round(B) + beta * C, sums in k order in float.
template <class S>
void gemm_bf16_naive(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t lda,
                     const S* B, int64_t ldb, float beta, float* C, int64_t ldc);

// The helpers below are compiled into each set's file with its flags: an anonymous namespace
// keeps every file's copy its own (one shared inline copy could be the AVX-512 one).
namespace {

// op(X)'s strides: op(A)(i, k) = A[i*rs + k*cs]; op(B) read as lines j over k alike.
struct Strides {
  int64_t rs, cs;
};
inline Strides a_strides(Trans ta, int64_t lda) { return ta == Trans::No ? Strides{lda, 1} : Strides{1, lda}; }
inline Strides b_strides(Trans tb, int64_t ldb) { return tb == Trans::No ? Strides{1, ldb} : Strides{ldb, 1}; }

// The bits of one input value (bf16.h's rounding, spelled here for the reason above).
inline uint16_t bf16_bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return uint16_t((u & 0x7fffffffu) > 0x7f800000u ? 0xffffu : r);
}
inline uint16_t bf16_bits_of(uint16_t x) { return x; }
inline float bf16_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// The packers, written once; each set's file instantiates them with its flags. Written for the
// vectoriser: conversions over contiguous runs, 32-bit words (a k pair) stored whole.
inline uint32_t bf16_pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | uint32_t(hi) << 16; }

template <class S>
void pack_pairs(const S* X, int64_t rs, int64_t cs, int64_t w, int64_t W, int64_t kc, int64_t kpad, uint16_t* dst) {
  uint32_t* d = reinterpret_cast<uint32_t*>(dst);  // d[p*W + i]: line i's k pair p
  const int64_t full = kc / 2, np = kpad / 2;
  if (cs == 1 && rs != 1) {  // each line contiguous in k: convert a line, then spread its pairs
    uint16_t line[2 * 512 + 2];
    for (int64_t i0 = 0; i0 < w; ++i0) {
      const S* x = X + i0 * rs;
      for (int64_t k0 = 0; k0 < kc; k0 += 1024) {
        const int64_t n = std::min<int64_t>(1024, kc - k0);
#pragma omp simd
        for (int64_t t = 0; t < n; ++t) line[t] = bf16_bits_of(x[k0 + t]);
        line[n] = 0;
        for (int64_t q = 0; q < (n + 1) / 2; ++q) std::memcpy(d + (k0 / 2 + q) * W + i0, line + 2 * q, 4);
      }
      for (int64_t p = (kc + 1) / 2; p < np; ++p) d[p * W + i0] = 0;
    }
  } else {  // k rows of the panel's lines: two rows interleaved into words
    for (int64_t p = 0; p < np; ++p) {
      uint32_t* dp = d + p * W;
      const S* x0 = X + 2 * p * cs;
      const S* x1 = x0 + cs;
      if (p < full) {
        if (rs == 1) {
#pragma omp simd
          for (int64_t i = 0; i < w; ++i) dp[i] = bf16_pair(bf16_bits_of(x0[i]), bf16_bits_of(x1[i]));
        } else {
          for (int64_t i = 0; i < w; ++i) dp[i] = bf16_pair(bf16_bits_of(x0[i * rs]), bf16_bits_of(x1[i * rs]));
        }
      } else if (2 * p < kc) {  // k odd: the last pair's second half is zero
        for (int64_t i = 0; i < w; ++i) dp[i] = bf16_bits_of(x0[i * rs]);
      } else {
        for (int64_t i = 0; i < w; ++i) dp[i] = 0;
      }
    }
  }
  for (int64_t p = 0; p < np; ++p)
    for (int64_t i = w; i < W; ++i) d[p * W + i] = 0;
}

template <class S>
void pack_rows32(const S* X, int64_t rs, int64_t cs, int64_t w, int64_t W, int64_t kc, int64_t kpad, uint16_t* dst) {
  for (int64_t kb = 0; kb < kpad / 32; ++kb)
    for (int64_t i = 0; i < W; ++i) {
      uint16_t* d = dst + (kb * W + i) * 32;
      const int64_t k0 = kb * 32, n = i < w ? std::min<int64_t>(32, std::max<int64_t>(0, kc - k0)) : 0;
      const S* x = X + i * rs + k0 * cs;
      if (cs == 1) {
#pragma omp simd
        for (int64_t t = 0; t < n; ++t) d[t] = bf16_bits_of(x[t]);
      } else {
        for (int64_t t = 0; t < n; ++t) d[t] = bf16_bits_of(x[t * cs]);
      }
      for (int64_t t = n; t < 32; ++t) d[t] = 0;
    }
}

// The AMX micro-kernel's tile program over the tile operations `Ops` (amx/amx_tiles.h: the
// instructions, or amx/amx_tile_model.h: a C++ model): the 32 x 32 block of C in the four
// accumulator tiles, per 32 k two A tiles (rows 0-15, 16-31 of the packed rows) and two B tiles
// (columns 0-15, 16-31 of the packed pairs). alpha 1 with beta 0 or 1 (every call but the
// caller's first and last scaling) stores the tiles into C (beta 1: loaded first and summed
// onto); else through a buffer.
template <class Ops>
void amx_tile_program(int64_t kpad, const uint16_t* a, int64_t a_rs, int64_t a_ks, const uint16_t* b, float alpha,
                      float beta, float* c, int64_t ldc) {
  alignas(64) float out[32 * 32];
  const bool direct = alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  float* o = direct ? c : out;
  const int64_t ldo = direct ? ldc : 32;
  if (direct && beta == 1.0f) Ops::load_acc(o, o + 16, o + 16 * ldo, o + 16 * ldo + 16, 4 * ldo);
  else Ops::zero_acc();
  for (int64_t kb = 0; kb < kpad / 32; ++kb) {
    const uint16_t* ak = a + kb * a_ks;         // 32 rows x 32 k
    const uint16_t* bk = b + kb * 16 * 32 * 2;  // 16 pairs x 32 columns x 2, 128 bytes a pair row
    Ops::template load_a<0>(ak, 2 * a_rs);       // rows 0-15
    Ops::template load_b<0>(bk, 128);            // columns 0-15
    Ops::template dot<0, 0>();
    Ops::template load_b<1>(bk + 32, 128);       // columns 16-31
    Ops::template dot<0, 1>();
    Ops::template load_a<1>(ak + 16 * a_rs, 2 * a_rs);  // rows 16-31
    Ops::template dot<1, 0>();
    Ops::template dot<1, 1>();
  }
  Ops::store_acc(o, o + 16, o + 16 * ldo, o + 16 * ldo + 16, 4 * ldo);
  if (direct) return;
  for (int64_t i = 0; i < 32; ++i) {
    float* ci = c + i * ldc;
    const float* oi = out + i * 32;
    if (beta == 0.0f) {
#pragma omp simd
      for (int64_t j = 0; j < 32; ++j) ci[j] = alpha * oi[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < 32; ++j) ci[j] = alpha * oi[j] + beta * ci[j];
    }
  }
}

}  // namespace

// The tile program's geometry is its blocking row's.
static_assert(kBf16Amx.MR == 32 && kBf16Amx.NR == 32 && kBf16Amx.KU == 32);

}  // namespace hddp::detail
