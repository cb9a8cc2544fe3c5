// Element-wise loops for AVX2 + FMA (built with -mavx2 -mfma): SLEEF's tanh for doubles (4 per vector).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hddp::detail {
namespace {
struct VecTanh {
  static constexpr int64_t kD = 4;
  static constexpr int64_t kF = 8;
  static void d(const double* x, double* y) { _mm256_storeu_pd(y, Sleef_tanhd4_u10avx2(_mm256_loadu_pd(x))); }
  static void expf(const float* x, float* y) { _mm256_storeu_ps(y, Sleef_expf8_u10avx2(_mm256_loadu_ps(x))); }
  static void expd(const double* x, double* y) { _mm256_storeu_pd(y, Sleef_expd4_u10avx2(_mm256_loadu_pd(x))); }
};
}  // namespace
}  // namespace hddp::detail

#include <hddp/kernels/elementwise/elementwise_loops.h>

namespace hddp::detail {
const EltKernels& elementwise_kernels_avx2() {
  static const EltKernels k = make_elt_kernels("avx2");
  return k;
}
}  // namespace hddp::detail
