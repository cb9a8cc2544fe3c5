#pragma once
// bf16 (bfloat16): the top 16 bits of an IEEE float (sign, 8 exponent bits, 7 mantissa bits).
// Conversions round to nearest, ties to even; denormals are rounded, not flushed; every NaN
// becomes the quiet NaN 0xFFFF: bit for bit PyTorch's `tensor.to(torch.bfloat16)` on the CPU
// (its vectorised conversion, ATen's cvtfp32_bf16; the test suite checks it against PyTorch
// over 1.39 M bit patterns). bf16 -> float is exact (the bits shifted back).
#include <cstdint>
#include <cstring>

namespace hddp {

struct bf16 {
  uint16_t bits = 0;
};
static_assert(sizeof(bf16) == 2);

// One value: add 0x7FFF plus the lowest kept bit, then drop the low 16 bits; a NaN (which the
// rounding could carry into infinity) becomes 0xFFFF.
inline bf16 to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return {uint16_t(nan ? 0xffffu : r)};
}
inline float to_float(bf16 h) {
  const uint32_t u = uint32_t(h.bits) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
// float -> bf16 -> float: the value a bf16 product reads.
inline float round_bf16(float x) { return to_float(to_bf16(x)); }

// The same over arrays, vectorised per instruction set like the element-wise kernels
// (elementwise.h) and split over OpenMP threads above kParallelMin; identical bits in every set.
void to_bf16(int64_t n, const float* x, bf16* y);
void to_float(int64_t n, const bf16* x, float* y);
void round_bf16(int64_t n, const float* x, float* y);  // y may alias x

}  // namespace hddp
