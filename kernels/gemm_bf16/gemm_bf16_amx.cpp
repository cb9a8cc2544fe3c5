// AMX micro-kernel of gemm_bf16 (built with -mamx-tile -mamx-bf16 -mavx512f): the tile program of
// gemm_bf16_ukernel.h on the tile registers. Each thread loads the one tile configuration it
// uses (all eight tiles 16 rows x 64 bytes) before its first tile instruction.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>

namespace hddp::detail {
namespace {

struct TileOps {
  static void zero_acc() {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  static void load_a(const uint16_t* a0, const uint16_t* a1, int64_t stride) {
    _tile_loadd(4, a0, stride);
    _tile_loadd(5, a1, stride);
  }
  static void load_b(const uint16_t* b0, const uint16_t* b1, int64_t stride) {
    _tile_loadd(6, b0, stride);
    _tile_loadd(7, b1, stride);
  }
  static void dot() {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  static void store_acc(float* c0, float* c1, float* c2, float* c3, int64_t stride) {
    _tile_stored(0, c0, stride);
    _tile_stored(1, c1, stride);
    _tile_stored(2, c2, stride);
    _tile_stored(3, c3, stride);
  }
};

// The 64-byte tile configuration: palette 1; bytes 16-31 each tile's bytes per row (16-bit),
// bytes 48-55 its rows.
void configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    const uint16_t colsb = 64;
    std::memcpy(cfg + 16 + 2 * t, &colsb, 2);
    cfg[48 + t] = 16;
  }
  _tile_loadconfig(cfg);
  configured = true;
}

void amx_ukernel(int64_t kpad, const uint16_t* a, const uint16_t* b, float alpha, float beta, float* c, int64_t ldc) {
  configure_tiles();
  alignas(64) float out[32 * 32];
  amx_tile_program<TileOps>(kpad, a, b, out);
  amx_store_tile(out, alpha, beta, c, ldc);
}

}  // namespace

const Bf16Kernels& gemm_bf16_kernels_amx() {
  static const Bf16Kernels k{"amx",           kBf16Amx,         amx_ukernel,
                             pack_rows32<float>, pack_pairs<float>, pack_rows32<uint16_t>, pack_pairs<uint16_t>};
  return k;
}

}  // namespace hddp::detail
