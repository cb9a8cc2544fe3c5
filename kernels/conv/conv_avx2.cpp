// The direct convolution's micro-kernels on AVX2+FMA: 8 floats per ymm (conv_ukernel.h).
// The only convolution file built with -mavx2 -mfma; called only after the CPU was checked.
#include <immintrin.h>

#include <string_view>

#include <hddp/kernels/conv/conv_ukernel.h>

namespace hddp::detail {
namespace {
struct V {
  using R = __m256;
  static constexpr int L = 8;
  static R zero() { return _mm256_setzero_ps(); }
  static R loadu(const float* p) { return _mm256_loadu_ps(p); }
  static R bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R add(R a, R b) { return _mm256_add_ps(a, b); }
  static R relu(R a) { return _mm256_max_ps(_mm256_setzero_ps(), a); }  // NaN stays NaN
  // Lane l of the mask set for l < n.
  static __m256i mask(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
  static R load_n(const float* p, int n) { return n == L ? loadu(p) : _mm256_maskload_ps(p, mask(n)); }
  static void store_n(float* p, R r, int n) {
    if (n == L) _mm256_storeu_ps(p, r);
    else _mm256_maskstore_ps(p, mask(n), r);
  }
};
}  // namespace
}  // namespace hddp::detail

#include "conv_ukernel_impl.h"

namespace hddp::detail {
const ConvKernels& conv_kernels_avx2() {
  static const ConvKernels k = make_kernels<row_of("avx2")>();
  return k;
}
}  // namespace hddp::detail
