// The fused attention's loops for AVX2 + FMA: SLEEF's exp, 8 floats or 4 doubles per vector.
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hddp::detail {
namespace {
struct VecExp {
  static constexpr int kLanes = 8;
  static void f(int64_t n, float* x) {
    for (int64_t i = 0; i < n; i += 8) _mm256_storeu_ps(x + i, Sleef_expf8_u10avx2(_mm256_loadu_ps(x + i)));
  }
  static void d(int64_t n, double* x) {
    for (int64_t i = 0; i < n; i += 4) _mm256_storeu_pd(x + i, Sleef_expd4_u10avx2(_mm256_loadu_pd(x + i)));
  }
};
}  // namespace
}  // namespace hddp::detail

#include <hddp/kernels/attention/attention_loops.h>

namespace hddp::detail {
const AttnKernels& attention_kernels_avx2() {
  static const AttnKernels k = make_attn_kernels("avx2");
  return k;
}
}  // namespace hddp::detail
