// The unit probe's AVX-512F loops (built with -mavx512f, run only where the CPU has it).
#include <immintrin.h>

#include <hddp/kernels/units/units_loops.h>
#include <hddp/kernels/units/units_loop.h>

namespace hddp::detail {
namespace {
__m512 fma_s(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
__m512d fma_d(__m512d a, __m512d b, __m512d c) { return _mm512_fmadd_pd(a, b, c); }
}  // namespace

int64_t unit_loop_fma_avx512(bool dbl, int64_t iters) {
  return dbl ? fma_loop<__m512d, fma_d>(_mm512_set1_pd(0.5), iters, 8)
             : fma_loop<__m512, fma_s>(_mm512_set1_ps(0.5f), iters, 16);
}

}  // namespace hddp::detail
