// The unit probe's AVX2+FMA loops (built with -mavx2 -mfma, run only where the CPU has them).
#include <immintrin.h>

#include <hddp/kernels/units/units_loops.h>
#include <hddp/kernels/units/units_loop.h>

namespace hddp::detail {
namespace {
__m256 fma_s(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
__m256d fma_d(__m256d a, __m256d b, __m256d c) { return _mm256_fmadd_pd(a, b, c); }
}  // namespace

int64_t unit_loop_fma_avx2(bool dbl, int64_t iters) {
  // m < 1: the chains converge to m / (1 - m), no overflow, no denormals.
  return dbl ? fma_loop<__m256d, fma_d>(_mm256_set1_pd(0.5), iters, 4)
             : fma_loop<__m256, fma_s>(_mm256_set1_ps(0.5f), iters, 8);
}

}  // namespace hddp::detail
