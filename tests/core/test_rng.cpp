// Rng: the documented algorithm (SplitMix64 seeding, xoshiro256**, jump streams, top-bit
// uniforms) against published test vectors and values computed by an independent Python
// implementation of core/rng.h's documentation; determinism, streams, state round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include <hddp/core/rng.h>

using hddp::Rng;

namespace {

TEST(Rng, SplitMix64PublishedVector) {
  // Rosetta Code "Pseudo-random numbers/Splitmix64", seed 1234567.
  uint64_t x = 1234567;
  const uint64_t want[] = {6457827717110365317ULL, 3203168211198807973ULL, 9817491932198370423ULL,
                           4593380528125082431ULL, 16408922859458223821ULL};
  for (uint64_t w : want) EXPECT_EQ(hddp::splitmix64_next(x), w);
}

TEST(Rng, Xoshiro256StarStarPublishedVector) {
  // Reference xoshiro256starstar.c started from state {1, 2, 3, 4}.
  Rng r;
  r.set_state({1, 2, 3, 4});
  const uint64_t want[] = {11520ULL, 0ULL, 1509978240ULL, 1215971899390074240ULL};
  for (uint64_t w : want) EXPECT_EQ(r.next_u64(), w);
}

TEST(Rng, JumpFromKnownState) {
  Rng r;
  r.set_state({1, 2, 3, 4});
  r.jump();
  const Rng::State want = {0x8c7a153956b5f3d1ULL, 0x701f1a713401d85eULL, 0x6527f66a65469085ULL,
                           0x8386b786c4408050ULL};
  EXPECT_EQ(r.state(), want);
}

TEST(Rng, SeededFirstValues) {
  Rng s0(0);
  const Rng::State want0 = {0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL, 0x06c45d188009454fULL,
                            0xf88bb8a8724c81ecULL};
  EXPECT_EQ(s0.state(), want0);
  EXPECT_EQ(s0.next_u64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(s0.next_u64(), 0xbf6e1f784956452aULL);

  Rng a(42);
  const uint64_t want42[] = {0x15780b2e0c2ec716ULL, 0x6104d9866d113a7eULL, 0xae17533239e499a1ULL,
                             0xecb8ad4703b360a1ULL};
  for (uint64_t w : want42) EXPECT_EQ(a.next_u64(), w);

  Rng b(42, 1);
  const uint64_t want42s1[] = {0x50086ef83cbf4f4aULL, 0xba285ec21347d703ULL, 0x5ea1247b4dc6452aULL,
                               0x03a5c66424702131ULL};
  for (uint64_t w : want42s1) EXPECT_EQ(b.next_u64(), w);

  Rng c(42, 3);
  EXPECT_EQ(c.next_u64(), 0x057ea7493b2592a3ULL);
  EXPECT_EQ(c.next_u64(), 0xd24b173f5c5cdd42ULL);
}

TEST(Rng, UniformFromTopBits) {
  Rng d(42), f(42);
  const double wd[] = {0.08386297105988216, 0.3789802506626686, 0.6800434110281394};
  const float wf[] = {0.08386296033859253f, 0.37898021936416626f, 0.6800433993339539f};
  for (double w : wd) EXPECT_EQ(d.uniform01<double>(), w);
  for (float w : wf) EXPECT_EQ(f.uniform01<float>(), w);
  // uniform(lo, hi) = lo + (hi - lo) * u from the same draw.
  Rng g(42);
  EXPECT_EQ(g.uniform(-3.0, 10.0), -3.0 + 13.0 * wd[0]);
}

TEST(Rng, SameSeedSameSequenceAndRange) {
  Rng a(7, 2), b(7, 2);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double x = a.uniform01<double>();
    ASSERT_EQ(x, b.uniform01<double>());
    ASSERT_GE(x, 0.0);
    ASSERT_LT(x, 1.0);
    const float y = a.uniform01<float>();
    ASSERT_EQ(y, b.uniform01<float>());
    ASSERT_GE(y, 0.0f);
    ASSERT_LT(y, 1.0f);
    sum += x;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);  // mean of U(0,1); std of the mean ~0.001
}

TEST(Rng, StreamsAndSeedsDiffer) {
  // Stream k is stream 0 jumped k times.
  Rng j(5);
  j.jump();
  j.jump();
  EXPECT_EQ(Rng(5, 2).state(), j.state());
  std::set<uint64_t> firsts;
  for (uint64_t s = 0; s < 8; ++s) firsts.insert(Rng(5, s).next_u64());
  for (uint64_t seed = 100; seed < 108; ++seed) firsts.insert(Rng(seed).next_u64());
  EXPECT_EQ(firsts.size(), 16u);
}

TEST(Rng, StateRoundTrip) {
  Rng a(123, 4);
  for (int i = 0; i < 10; ++i) a.next_u64();
  const Rng::State saved = a.state();
  std::vector<uint64_t> first;
  for (int i = 0; i < 5; ++i) first.push_back(a.next_u64());
  Rng b(999);
  b.set_state(saved);
  for (uint64_t v : first) EXPECT_EQ(b.next_u64(), v);
  EXPECT_THROW(b.set_state({0, 0, 0, 0}), std::invalid_argument);
}

}  // namespace
