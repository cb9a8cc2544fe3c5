// The fused attention's loops for baseline x86-64 (SSE2): SLEEF's exp, 4 floats or 2 doubles
// per vector. Any CPU.
#include <emmintrin.h>
#include <sleef.h>

#include <cstdint>

namespace hddp::detail {
namespace {
struct VecExp {
  static constexpr int kLanes = 4;
  static void f(int64_t n, float* x) {
    for (int64_t i = 0; i < n; i += 4) _mm_storeu_ps(x + i, Sleef_expf4_u10sse2(_mm_loadu_ps(x + i)));
  }
  static void d(int64_t n, double* x) {
    for (int64_t i = 0; i < n; i += 2) _mm_storeu_pd(x + i, Sleef_expd2_u10sse2(_mm_loadu_pd(x + i)));
  }
};
}  // namespace
}  // namespace hddp::detail

#include <hddp/kernels/attention/attention_loops.h>

namespace hddp::detail {
const AttnKernels& attention_kernels_portable() {
  static const AttnKernels k = make_attn_kernels("portable");
  return k;
}
}  // namespace hddp::detail
