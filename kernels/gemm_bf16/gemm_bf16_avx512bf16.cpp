// AVX512_BF16 micro-kernel of gemm_bf16 (built with -mavx512f -mavx512bf16): a 14 x 32 float
// tile in 28 accumulators; per k pair one 32-bit word of A (two bf16) broadcast per row and two
// vectors of B's pairs, vdpbf16ps adding both products to each float lane.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>

namespace hddp::detail {
namespace {

constexpr int64_t kMR = kBf16Avx512.MR, kNR = kBf16Avx512.NR;  // the tile below holds kNR = 2 zmm
static_assert(kNR == 32 && kBf16Avx512.KU == 2);

void ukernel_14x32(int64_t kpad, const uint16_t* a, int64_t, int64_t, const uint16_t* b, float alpha, float beta,
                   float* c, int64_t ldc) {  // A always packed (a_in_place false)
  __m512 acc[kMR][2];
  for (int64_t i = 0; i < kMR; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < kpad / 2; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * 2 * kNR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * 2 * kNR + 32);
    const uint16_t* ap = a + p * 2 * kMR;
    for (int64_t i = 0; i < kMR; ++i) {
      int32_t word;
      std::memcpy(&word, ap + 2 * i, 4);
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(word);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int64_t i = 0; i < kMR; ++i)
    for (int h = 0; h < 2; ++h) {
      float* ci = c + i * ldc + 16 * h;
      __m512 r = _mm512_mul_ps(va, acc[i][h]);
      if (beta != 0.0f) r = _mm512_fmadd_ps(vb, _mm512_loadu_ps(ci), r);
      _mm512_storeu_ps(ci, r);
    }
}

}  // namespace

const Bf16Kernels& gemm_bf16_kernels_avx512bf16() {
  static const Bf16Kernels k{"avx512bf16", kBf16Avx512, ukernel_14x32,
                             pack_pairs<float>, pack_pairs<float>, pack_pairs<uint16_t>, pack_pairs<uint16_t>};
  return k;
}

}  // namespace hddp::detail
