// Element-wise loops for AVX-512F/DQ (built with -mavx512f -mavx512dq): SLEEF's AVX-512 tanh
// (16 floats, 8 doubles).
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hddp::detail {
namespace {
struct VecTanh {
  static constexpr int64_t kF = 16, kD = 8;
  static void f(const float* x, float* y) { _mm512_storeu_ps(y, Sleef_tanhf16_u10avx512f(_mm512_loadu_ps(x))); }
  static void d(const double* x, double* y) { _mm512_storeu_pd(y, Sleef_tanhd8_u10avx512f(_mm512_loadu_pd(x))); }
};
}  // namespace
}  // namespace hddp::detail

#include "kernels/elementwise_loops.h"

namespace hddp::detail {
const EltKernels& avx512_elementwise() {
  static const EltKernels k = make_elt_kernels("avx512");
  return k;
}
}  // namespace hddp::detail
