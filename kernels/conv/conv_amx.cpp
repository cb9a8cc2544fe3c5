// The direct convolution's AMX micro-kernel (built with -mamx-tile -mamx-bf16): conv_amx_program.h
// on the tile registers, the thread's tile configuration loaded before its first tile instruction.
#include <hddp/kernels/amx/amx_tiles.h>
#include <hddp/kernels/conv/conv_amx_program.h>

namespace hddp::detail {
namespace {

void brgemm_amx(const AmxCall& c) {
  amx_configure_tiles();
  amx_brgemm<TileOps>(c);
}

}  // namespace

const AmxBrgemm& conv_amx() {
  static const AmxBrgemm k = brgemm_amx;
  return k;
}

}  // namespace hddp::detail
