// The unit probe's AVX512_BF16 loop (built with -mavx512f -mavx512bf16, run only where the CPU has
// it): vdpbf16ps adds the two bf16 products of each pair to a float lane, 16 lanes x 2 pairs x
// 2 flops = 64 flops per instruction.
#include <immintrin.h>

#include <hddp/kernels/units/units_loops.h>
#include <hddp/kernels/units/units_loop.h>

namespace hddp::detail {
namespace {
// fma_loop's chains are __m512; the multiplicands' bits are bf16 pairs.
__m512 dot(__m512 acc, __m512 a, __m512 b) { return _mm512_dpbf16_ps(acc, (__m512bh)a, (__m512bh)b); }
}  // namespace

int64_t unit_loop_dpbf16_avx512(int64_t iters) {
  // bf16 0.5 (0x3F00) in both halves of each lane: every chain grows by 0.5 per instruction,
  // far from overflow for any run length, no denormals.
  return fma_loop<__m512, dot>(_mm512_castsi512_ps(_mm512_set1_epi16(0x3F00)), iters, 32);
}

}  // namespace hddp::detail
