// The unit probe's AMX-BF16 loop (built with -mamx-tile -mamx-bf16, run only where the CPU has it and
// Linux granted the tile state). C tiles 0-3 (16 x 16 float) += A tiles 4, 5 (16 x 32 bf16) times
// B tiles 6, 7 (16 pairs x 16 columns), all held in the tile registers: no memory traffic in the
// loop. Four independent accumulators cover tdpbf16ps's latency (Intel's optimization manual:
// about 52 cycles against one issue per 16). The tile numbers are literals: GCC's intrinsics
// paste them into the instruction text.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include <hddp/kernels/amx/amx_tiles.h>
#include <hddp/kernels/units/units_loops.h>

namespace hddp::detail {

int64_t unit_loop_tdpbf16_amx(int64_t iters) {
  // A and B: bf16 0.5 everywhere, so each C element grows by 32 x 0.25 = 8 per instruction.
  alignas(64) uint16_t ab[16 * 32];
  for (uint16_t& v : ab) v = 0x3F00;
  // The tile intrinsics pass addresses in registers without telling GCC the memory is read:
  // make the array's stores happen first.
  __asm__ volatile("" : : "r"(ab) : "memory");
  amx_configure_tiles();
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
  return iters * 4 * (16 * 16 * 32 * 2);
}

}  // namespace hddp::detail
