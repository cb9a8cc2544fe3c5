// The fused attention's loops for AVX-512F (built with -mavx512f): SLEEF's exp, 16 floats or 8
// doubles per vector.
#include <immintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hddp::detail {
namespace {
struct VecExp {
  static constexpr int kLanes = 16;
  static void f(int64_t n, float* x) {
    for (int64_t i = 0; i < n; i += 16) _mm512_storeu_ps(x + i, Sleef_expf16_u10avx512f(_mm512_loadu_ps(x + i)));
  }
  static void d(int64_t n, double* x) {
    for (int64_t i = 0; i < n; i += 8) _mm512_storeu_pd(x + i, Sleef_expd8_u10avx512f(_mm512_loadu_pd(x + i)));
  }
};
}  // namespace
}  // namespace hddp::detail

#include <hddp/kernels/attention/attention_loops.h>

namespace hddp::detail {
const AttnKernels& attention_kernels_avx512() {
  static const AttnKernels k = make_attn_kernels("avx512");
  return k;
}
}  // namespace hddp::detail
