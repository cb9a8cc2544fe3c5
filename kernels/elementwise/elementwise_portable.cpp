// Element-wise loops for any x86-64 CPU: baseline flags, SLEEF's tanh for doubles (2 per vector).
#include <emmintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hddp::detail {
namespace {
struct VecTanh {
  static constexpr int64_t kD = 2;
  static constexpr int64_t kF = 4;
  static void d(const double* x, double* y) { _mm_storeu_pd(y, Sleef_tanhd2_u10sse2(_mm_loadu_pd(x))); }
  static void expf(const float* x, float* y) { _mm_storeu_ps(y, Sleef_expf4_u10sse2(_mm_loadu_ps(x))); }
  static void expd(const double* x, double* y) { _mm_storeu_pd(y, Sleef_expd2_u10sse2(_mm_loadu_pd(x))); }
};
}  // namespace
}  // namespace hddp::detail

#include <hddp/kernels/elementwise/elementwise_loops.h>

namespace hddp::detail {
const EltKernels& elementwise_kernels_portable() {
  static const EltKernels k = make_elt_kernels("portable");
  return k;
}
}  // namespace hddp::detail
