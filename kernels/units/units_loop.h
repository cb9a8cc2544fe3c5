#pragma once
// The unit probe's loop, included by each instruction-set file with its register type.
// 12 accumulators: x = x * m + m keeps each chain dependent on itself only, and the asm
// barrier stops the compiler from folding or vectorising the chains away.
#include <cstdint>

namespace hddp::detail {

template <class R, R (*Fma)(R, R, R)>
int64_t fma_loop(R m, int64_t iters, int lanes) {
  R a0 = m, a1 = m, a2 = m, a3 = m, a4 = m, a5 = m, a6 = m, a7 = m, a8 = m, a9 = m, a10 = m, a11 = m;
  for (int64_t i = 0; i < iters; ++i) {
    a0 = Fma(a0, m, m), a1 = Fma(a1, m, m), a2 = Fma(a2, m, m), a3 = Fma(a3, m, m);
    a4 = Fma(a4, m, m), a5 = Fma(a5, m, m), a6 = Fma(a6, m, m), a7 = Fma(a7, m, m);
    a8 = Fma(a8, m, m), a9 = Fma(a9, m, m), a10 = Fma(a10, m, m), a11 = Fma(a11, m, m);
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5));
    __asm__ volatile("" : "+x"(a6), "+x"(a7), "+x"(a8), "+x"(a9), "+x"(a10), "+x"(a11));
  }
  volatile R sink = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
  (void)sink;
  return iters * 12 * 2 * int64_t(lanes);
}

}  // namespace hddp::detail
