#pragma once
// A plain C++ model of the AMX tile unit (amx_tiles.h): the eight tile registers and the
// operations of the roles plan, products and sums as TDPBF16PS defines them per element (each
// pair's two products added to the accumulator in order). Tile programs run on it on any CPU,
// so their packing and tile addressing are tested where no AMX exists. Slow; for tests.
#include <cstdint>
#include <cstring>

namespace hddp::detail {
namespace {

struct ModelOps {
  struct Tile {
    uint8_t row[16][64];
  };
  static Tile* tiles() {
    thread_local Tile t[8];
    return t;
  }
  static float value(const uint8_t* p) {  // the bf16 at p, widened
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t u = uint32_t(h) << 16;
    float x;
    std::memcpy(&x, &u, 4);
    return x;
  }
  static void load(int t, const void* p, int64_t stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(tiles()[t].row[r], static_cast<const uint8_t*>(p) + r * stride, 64);
  }
  static void store(int t, void* p, int64_t stride) {
    for (int r = 0; r < 16; ++r) std::memcpy(static_cast<uint8_t*>(p) + r * stride, tiles()[t].row[r], 64);
  }
  static void zero_acc() { std::memset(tiles(), 0, 4 * sizeof(Tile)); }
  static void load_acc(const float* c0, const float* c1, const float* c2, const float* c3, int64_t s) {
    load(0, c0, s), load(1, c1, s), load(2, c2, s), load(3, c3, s);
  }
  template <int I>
  static void load_a(const void* a, int64_t s) {
    load(4 + I, a, s);
  }
  template <int J>
  static void load_b(const void* b, int64_t s) {
    load(6 + J, b, s);
  }
  // tile c += tile a . tile b, per element in order: the pair's two products onto the sum.
  static void dpbf16(int c, int a, int b) {
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        float acc;
        std::memcpy(&acc, tiles()[c].row[m] + 4 * n, 4);
        for (int kp = 0; kp < 16; ++kp)
          for (int e = 0; e < 2; ++e)
            acc += value(tiles()[a].row[m] + 4 * kp + 2 * e) * value(tiles()[b].row[kp] + 4 * n + 2 * e);
        std::memcpy(tiles()[c].row[m] + 4 * n, &acc, 4);
      }
  }
  template <int I, int J>
  static void dot() {
    dpbf16(2 * I + J, 4 + I, 6 + J);
  }
  static void store_acc(float* c0, float* c1, float* c2, float* c3, int64_t s) {
    store(0, c0, s), store(1, c1, s), store(2, c2, s), store(3, c3, s);
  }
};

}  // namespace
}  // namespace hddp::detail
