// Element-wise loops for AVX-512F (built with -mavx512f): SLEEF's tanh for doubles (8 per vector).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hddp::detail {
namespace {
struct VecTanh {
  static constexpr int64_t kD = 8;
  static constexpr int64_t kF = 16;
  static void d(const double* x, double* y) { _mm512_storeu_pd(y, Sleef_tanhd8_u10avx512f(_mm512_loadu_pd(x))); }
  static void expf(const float* x, float* y) { _mm512_storeu_ps(y, Sleef_expf16_u10avx512f(_mm512_loadu_ps(x))); }
  static void expd(const double* x, double* y) { _mm512_storeu_pd(y, Sleef_expd8_u10avx512f(_mm512_loadu_pd(x))); }
};
}  // namespace
}  // namespace hddp::detail

#include <hddp/kernels/elementwise/elementwise_loops.h>

namespace hddp::detail {
const EltKernels& elementwise_kernels_avx512() {
  static const EltKernels k = make_elt_kernels("avx512");
  return k;
}
}  // namespace hddp::detail
