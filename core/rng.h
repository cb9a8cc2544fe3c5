#pragma once
// Rng: a seeded pseudo-random generator whose output is fixed by this file alone, identical on
// every platform and compiler (unlike std::uniform_real_distribution, whose output is
// implementation-defined).
//
// Algorithm
//   - Generator: xoshiro256** 1.0 (Blackman & Vigna, https://prng.di.unimi.it/xoshiro256starstar.c),
//     256-bit state s[0..3], period 2^256 - 1.
//   - Seeding: Rng(seed, stream) fills s[0..3] with the first four outputs of SplitMix64
//     started at `seed` (https://prng.di.unimi.it/splitmix64.c), then applies xoshiro256**'s
//     jump() `stream` times. jump() advances by 2^128 outputs, so streams 0, 1, 2, ... are
//     non-overlapping slices of one sequence (2^128 values each): the driver uses stream = rank.
//     Seeding costs about a microsecond per stream index.
//   - uniform01<double>() = (next_u64() >> 11) * 2^-53, the top 53 bits: in [0, 1).
//     uniform01<float>()  = (next_u64() >> 40) * 2^-24, the top 24 bits: in [0, 1).
//   - uniform(lo, hi) = lo + (hi - lo) * uniform01<T>(), in T arithmetic.
//
// The full state is four uint64 (state() / set_state()), for checkpoints.
#include <array>
#include <cmath>
#include <cstdint>

#include <hddp/kernels/check.h>

namespace hddp {

// One SplitMix64 step: advances x and returns the next output.
inline uint64_t splitmix64_next(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A seed derived from (seed, a, b), e.g. a rank and a step: SplitMix64 over the three in turn.
// Different triples give unrelated seeds; no stream is jumped, so it costs the same at any step.
inline uint64_t derive_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t x = seed;
  x = splitmix64_next(x) ^ a;
  x = splitmix64_next(x) ^ b;
  return splitmix64_next(x);
}

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0, uint64_t stream = 0) {
    uint64_t x = seed;
    for (auto& w : s_) w = splitmix64_next(x);
    // SplitMix64 outputs are a bijection of distinct inputs: four zeros cannot happen.
    for (uint64_t i = 0; i < stream; ++i) jump();
  }

  // xoshiro256**: the next 64 random bits.
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) from the top 53 (double) or 24 (float) bits of one next_u64().
  template <class T>
  T uniform01() {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
    if constexpr (sizeof(T) == 8)
      return T(next_u64() >> 11) * T(0x1.0p-53);
    else
      return T(next_u64() >> 40) * T(0x1.0p-24f);
  }

  // lo + (hi - lo) * u: in [lo, hi) up to rounding of the last operation.
  template <class T>
  T uniform(T lo, T hi) {
    return lo + (hi - lo) * uniform01<T>();
  }

  // Normal(mean, sd) by Box-Muller from two uniform01<double>() (one value per pair: no state
  // beyond the generator's), rounded to T. Initial weights (GPT-2's N(0, 0.02)).
  template <class T>
  T normal(double mean, double sd) {
    const double u1 = 1.0 - uniform01<double>(), u2 = uniform01<double>();  // u1 in (0, 1]
    return T(mean + sd * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }

  // Advance by 2^128 outputs (Vigna's jump polynomial for xoshiro256).
  void jump() {
    static constexpr uint64_t kJump[] = {0x180ec6d33cfd0abaULL, 0xd5a61266f0c9392cULL,
                                         0xa9582618e03fc9aaULL, 0x39abdc4529b1661cULL};
    State t{0, 0, 0, 0};
    for (uint64_t j : kJump)
      for (int b = 0; b < 64; ++b) {
        if (j & (uint64_t(1) << b))
          for (int k = 0; k < 4; ++k) t[k] ^= s_[k];
        next_u64();
      }
    s_ = t;
  }

  // The whole state, for checkpoints: set_state(state()) resumes the same sequence.
  const State& state() const { return s_; }
  void set_state(const State& s) {
    HDDP_CHECK_ARG(s[0] | s[1] | s[2] | s[3], "Rng::set_state: the all-zero state is invalid for xoshiro256**");
    s_ = s;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  State s_{};
};

}  // namespace hddp
