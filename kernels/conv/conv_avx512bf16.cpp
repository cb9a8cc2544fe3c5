// The direct convolution's bf16 micro-kernel (built with -mavx512f -mavx512bf16): conv_ukernel.h's
// batch-reduce GEMM with A and B as bf16 pairs, vdpbf16ps adding both products of a pair into
// each float accumulator (twice the float FMA's flops per instruction), the store as the float
// kernel's (accumulate, bias, ReLU, the last vector's lanes past N untouched).
#include <immintrin.h>

#include <cstring>
#include <iterator>
#include <string_view>
#include <utility>

#include <hddp/kernels/conv/conv_ukernel.h>

namespace hddp::detail {
namespace {

constexpr int kL = 16;

template <int MR, int NV>
void brgemm16(const BrgemmCall16& c) {
  __m512 acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
  for (int64_t t = 0; t < c.n; ++t) {
    const uint16_t* a = c.a[t];
    const uint16_t* b = c.b[t];
    const int64_t K = c.k[t];
    for (int64_t q = 0; q < K; ++q) {
      __m512bh bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = (__m512bh)_mm512_loadu_si512(b + q * c.ldb + v * 2 * kL);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        int32_t word;
        std::memcpy(&word, a + i * c.rsa + 2 * q, 4);
        const __m512bh ai = (__m512bh)_mm512_set1_epi32(word);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
      }
    }
  }
  const int last = int(c.N - (NV - 1) * kL);
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) {
      float* cp = c.c + i * c.ldc + v * kL;
      const __mmask16 m = v == NV - 1 ? __mmask16((1u << last) - 1u) : __mmask16(0xffff);
      __m512 r = acc[i][v];
      if (c.accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(m, cp));
      if (c.bias) r = _mm512_add_ps(r, _mm512_loadu_ps(c.bias + v * kL));
      if (c.relu)  // r < 0 -> 0; NaN stays NaN
        r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(r, _mm512_setzero_ps(), _CMP_LT_OQ), r, _mm512_setzero_ps());
      _mm512_mask_storeu_ps(cp, m, r);
    }
}

constexpr int row_of(std::string_view isa) {
  for (int i = 0; i < int(std::size(kConvBlocking)); ++i)
    if (kConvBlocking[i].isa == isa) return i;
  return -1;
}
constexpr int kRow = row_of("avx512");
static_assert(kRow >= 0 && kConvBlocking[kRow].L == kL);

template <int NV, int... I>
void fill(BrgemmKernel16* row, std::integer_sequence<int, I...>) {
  ((row[I] = I + 1 <= kConvBlocking[kRow].mr[NV - 1] ? &brgemm16<I + 1, NV> : nullptr), ...);
}

}  // namespace

const ConvKernels16& conv_kernels_avx512bf16() {
  static const ConvKernels16 k = [] {
    ConvKernels16 r{};
    r.blocking = &kConvBlocking[kRow];
    static_assert(kConvBlocking[kRow].nv == 2);
    fill<1>(r.kernel[0], std::make_integer_sequence<int, kConvMaxMR>{});
    fill<2>(r.kernel[1], std::make_integer_sequence<int, kConvMaxMR>{});
    return r;
  }();
  return k;
}

}  // namespace hddp::detail
