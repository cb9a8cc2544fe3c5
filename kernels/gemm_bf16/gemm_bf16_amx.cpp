// AMX micro-kernel of gemm_bf16 (built with -mamx-tile -mamx-bf16 -mavx512f): the tile program of
// gemm_bf16_ukernel.h on the tile registers (amx/amx_tiles.h), the thread's tile configuration
// loaded before its first tile instruction.
#include <immintrin.h>

#include <cstdint>

#include <hddp/kernels/amx/amx_tiles.h>
#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>

namespace hddp::detail {
namespace {

void amx_ukernel(int64_t kpad, const uint16_t* a, int64_t a_rs, int64_t a_ks, const uint16_t* b, float alpha,
                 float beta, float* c, int64_t ldc) {
  amx_configure_tiles();
  amx_tile_program<TileOps>(kpad, a, a_rs, a_ks, b, alpha, beta, c, ldc);
}

}  // namespace

const Bf16Kernels& gemm_bf16_kernels_amx() {
  static const Bf16Kernels k{"amx",           kBf16Amx,         amx_ukernel,
                             pack_rows32<float>, pack_pairs<float>, pack_rows32<uint16_t>, pack_pairs<uint16_t>, true};
  return k;
}

}  // namespace hddp::detail
