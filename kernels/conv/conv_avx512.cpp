// The direct convolution's micro-kernels on AVX-512F: 16 floats per zmm (conv_ukernel.h).
// The only convolution file built with -mavx512f; called only after the CPU was checked.
#include <immintrin.h>

#include <string_view>

#include <hddp/kernels/conv/conv_ukernel.h>

namespace hddp::detail {
namespace {
struct V {
  using R = __m512;
  static constexpr int L = 16;
  static R zero() { return _mm512_setzero_ps(); }
  static R loadu(const float* p) { return _mm512_loadu_ps(p); }
  static R bcast(const float* p) { return _mm512_set1_ps(*p); }
  static R fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm512_add_ps(a, b); }
  static R relu(R a) {  // a < 0 -> 0; NaN stays NaN
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, zero(), _CMP_LT_OQ), a, zero());
  }
  static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }
  static R load_n(const float* p, int n) { return n == L ? loadu(p) : _mm512_maskz_loadu_ps(mask(n), p); }
  static void store_n(float* p, R r, int n) {
    if (n == L) _mm512_storeu_ps(p, r);
    else _mm512_mask_storeu_ps(p, mask(n), r);
  }
};
}  // namespace
}  // namespace hddp::detail

#include "conv_ukernel_impl.h"

namespace hddp::detail {
const ConvKernels& conv_kernels_avx512() {
  static const ConvKernels k = make_kernels<row_of("avx512")>();
  return k;
}
}  // namespace hddp::detail
