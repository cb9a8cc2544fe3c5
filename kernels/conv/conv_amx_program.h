#pragma once
// The convolution's AMX tile program (conv_ukernel.h, AmxCall) over the tile operations `Ops`
// (amx/amx_tiles.h: the instructions in conv_amx.cpp; amx/amx_tile_model.h: the C++ model in
// conv.cpp). Per product and block of 32 k: two A tiles (rows 0-15, 16-31, lda apart), two B
// tiles (columns 0-15, 16-31 of 16 pair rows), four tile products.
#include <cstdint>

#include <hddp/kernels/conv/conv_ukernel.h>

namespace hddp::detail {
namespace {

template <class Ops>
void amx_brgemm(const AmxCall& c) {
  float* o = c.out;
  if (c.accumulate) Ops::load_acc(o, o + 16, o + 16 * 32, o + 16 * 32 + 16, 128);
  else Ops::zero_acc();
  for (int64_t t = 0; t < c.n; ++t)
    for (int64_t kb = 0; kb < c.kb[t]; ++kb) {
      const uint16_t* a = c.a[t] + kb * 32;
      const uint16_t* b = c.b[t] + kb * 16 * c.ldb;
      Ops::template load_a<0>(a, 2 * c.lda);
      Ops::template load_b<0>(b, 2 * c.ldb);
      Ops::template dot<0, 0>();
      Ops::template load_b<1>(b + 32, 2 * c.ldb);
      Ops::template dot<0, 1>();
      Ops::template load_a<1>(a + 16 * c.lda, 2 * c.lda);
      Ops::template dot<1, 0>();
      Ops::template dot<1, 1>();
    }
  Ops::store_acc(o, o + 16, o + 16 * 32, o + 16 * 32 + 16, 128);
}

}  // namespace
}  // namespace hddp::detail
