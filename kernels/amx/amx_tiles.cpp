// The tile configuration (built with -mamx-tile): one per thread, loaded once.
#include <hddp/kernels/amx/amx_tiles.h>

#include <cstring>

namespace hddp::detail {

void amx_configure_tiles() {
  thread_local bool configured = false;
  if (configured) return;
  // The 64-byte block of LDTILECFG: byte 0 palette 1; bytes 16 + 2t tile t's bytes per row
  // (16-bit); byte 48 + t its rows.
  alignas(64) uint8_t cfg[64] = {};
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    const uint16_t colsb = 64;
    std::memcpy(cfg + 16 + 2 * t, &colsb, 2);
    cfg[48 + t] = 16;
  }
  // ldtilecfg's operand is a pointer GCC does not see read: the stores above happen first.
  __asm__ volatile("" : : "r"(cfg) : "memory");
  _tile_loadconfig(cfg);
  configured = true;
}

}  // namespace hddp::detail
