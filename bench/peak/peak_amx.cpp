// The probe's AMX-BF16 loop (built with -mamx-tile -mamx-bf16, run only where the CPU has it and
// Linux granted the tile state). C tiles 0-3 (16 x 16 float) += A tiles 4, 5 (16 x 32 bf16) times
// B tiles 6, 7 (16 pairs x 16 columns), all held in the tile registers: no memory traffic in the
// loop. Four independent accumulators cover tdpbf16ps's latency (Intel's optimization manual:
// about 52 cycles against one issue per 16). The tile numbers are literals: GCC's intrinsics
// paste them into the instruction text.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "peak.h"

namespace hddp::bench::detail {

int64_t bf16_loop_amx(int64_t iters) {
  // The 64-byte tile configuration (Intel's ISA manual, LDTILECFG): byte 0 palette 1; bytes
  // 16 + 2t tile t's bytes per row (16-bit); byte 48 + t its rows. All eight: 16 rows x 64 bytes.
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    const uint16_t colsb = 64;
    std::memcpy(cfg + 16 + 2 * t, &colsb, 2);
    cfg[48 + t] = 16;
  }
  // A and B: bf16 0.5 everywhere, so each C element grows by 32 x 0.25 = 8 per instruction.
  alignas(64) uint16_t ab[16 * 32];
  for (uint16_t& v : ab) v = 0x3F00;
  // The tile intrinsics pass addresses in registers without telling GCC the memory is read
  // (ldtilecfg's operand claims 8 bytes): make both arrays' stores happen first.
  __asm__ volatile("" : : "r"(cfg), "r"(ab) : "memory");
  _tile_loadconfig(cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_release();
  return iters * 4 * (16 * 16 * 32 * 2);
}

}  // namespace hddp::bench::detail
