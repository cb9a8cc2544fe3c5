// DistributedSampler against orders worked out by hand from a reference xoshiro256** in Python
// (the permutation bits mnist_train's runs depend on), the partition of the padded order over
// ranks, sizes 0, 1 and odd, shuffle off; shard_of.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <hddp/data/sampler.h>

using namespace hddp;

namespace {

using V = std::vector<int64_t>;

// The whole padded order of an epoch, read back from the ranks: position p is rank p % size's
// entry p / size.
V padded(int64_t n, uint64_t seed, int64_t epoch, int size, bool shuffle) {
  std::vector<V> per;
  for (int r = 0; r < size; ++r) per.push_back(DistributedSampler(n, seed, r, size, shuffle).order(epoch));
  V all;
  for (size_t k = 0; k < per[0].size(); ++k)
    for (int r = 0; r < size; ++r) all.push_back(per[size_t(r)][k]);
  return all;
}

TEST(Sampler, HandComputedOrder) {
  // Rng(42, stream 1), Fisher-Yates over 7: [5, 2, 4, 1, 0, 3, 6]; padded to 9 by its start:
  // 5 2 4 1 0 3 6 | 5 2; rank r takes positions r, r + 3, r + 6.
  EXPECT_EQ(DistributedSampler(7, 42, 0, 3).order(1), (V{5, 1, 6}));
  EXPECT_EQ(DistributedSampler(7, 42, 1, 3).order(1), (V{2, 0, 5}));
  EXPECT_EQ(DistributedSampler(7, 42, 2, 3).order(1), (V{4, 3, 2}));
  EXPECT_EQ(DistributedSampler(7, 42, 0, 1).order(2), (V{1, 4, 3, 2, 6, 5, 0}));
  EXPECT_EQ(DistributedSampler(10, 2024, 0, 1).order(3), (V{9, 1, 0, 4, 6, 7, 3, 2, 5, 8}));
  // Two ranks of 10: rank 0 the even positions, rank 1 the odd ones.
  EXPECT_EQ(DistributedSampler(10, 2024, 0, 2).order(3), (V{9, 0, 6, 3, 5}));
  EXPECT_EQ(DistributedSampler(10, 2024, 1, 2).order(3), (V{1, 4, 7, 2, 8}));
}

TEST(Sampler, RanksPartitionThePaddedOrder) {
  for (int64_t n : {0, 1, 2, 7, 13, 64, 101})
    for (int size : {1, 2, 3, 4, 5, 8, 16}) {
      const DistributedSampler s(n, 7, 0, size);
      EXPECT_EQ(s.per_rank(), (n + size - 1) / size);
      const V all = padded(n, 7, 3, size, true);
      ASSERT_EQ(int64_t(all.size()), s.per_rank() * size) << n << " over " << size;
      // The first n positions are a permutation of [0, n); the padding repeats the start.
      V first(all.begin(), all.begin() + n);
      std::sort(first.begin(), first.end());
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(first[size_t(i)], i) << n << " over " << size;
      for (size_t p = size_t(n); p < all.size(); ++p) EXPECT_EQ(all[p], all[p % size_t(n)]) << n << " over " << size;
      // The permutation itself does not depend on the number of ranks.
      const V one = DistributedSampler(n, 7, 0, 1).order(3);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), all.begin())) << n << " over " << size;
    }
}

TEST(Sampler, EpochsAndSeedsDiffer) {
  const V a = DistributedSampler(50, 1, 0, 1).order(1);
  EXPECT_NE(a, DistributedSampler(50, 1, 0, 1).order(2));
  EXPECT_NE(a, DistributedSampler(50, 2, 0, 1).order(1));
  EXPECT_EQ(a, DistributedSampler(50, 1, 0, 1).order(1));
}

TEST(Sampler, NoShuffleIsInOrderOnEveryRankCount) {
  for (int64_t n : {0, 1, 5, 9})
    for (int size : {1, 2, 3, 4, 7}) {
      const V all = padded(n, 99, 4, size, false);
      for (size_t p = 0; p < all.size(); ++p) EXPECT_EQ(all[p], int64_t(p % size_t(n))) << n << " over " << size;
    }
  EXPECT_EQ(DistributedSampler(5, 0, 1, 2, false).order(1), (V{1, 3, 0}));
  EXPECT_EQ(DistributedSampler(5, 0, 0, 2, false).order(9), DistributedSampler(5, 123, 0, 2, false).order(1));
}

TEST(Sampler, SizesAndSteps) {
  EXPECT_TRUE(DistributedSampler(0, 1, 0, 3).order(1).empty());
  EXPECT_EQ(DistributedSampler(0, 1, 0, 3).steps(4), 0);
  EXPECT_EQ(DistributedSampler(1, 1, 2, 3).order(1), (V{0}));  // padding: every rank gets sample 0
  const DistributedSampler s(13, 1, 0, 3);                      // 5 per rank
  EXPECT_EQ(s.per_rank(), 5);
  EXPECT_EQ(s.steps(1), 5);
  EXPECT_EQ(s.steps(2), 3);
  EXPECT_EQ(s.steps(5), 1);
  EXPECT_EQ(s.steps(64), 1);
  EXPECT_THROW(s.steps(0), std::invalid_argument);
  EXPECT_THROW(s.order(-1), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(-1, 1, 0, 1), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(5, 1, 3, 3), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(5, 1, -1, 3), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(5, 1, 0, 0), std::invalid_argument);
}

TEST(Sampler, ShardOf) {
  // 10 over 3: 4, 3, 3 rows, contiguous from 0.
  EXPECT_EQ(shard_of(10, 0, 3).begin, 0);
  EXPECT_EQ(shard_of(10, 0, 3).count, 4);
  EXPECT_EQ(shard_of(10, 1, 3).begin, 4);
  EXPECT_EQ(shard_of(10, 1, 3).count, 3);
  EXPECT_EQ(shard_of(10, 2, 3).begin, 7);
  EXPECT_EQ(shard_of(10, 2, 3).count, 3);
  for (int64_t global : {0, 1, 5, 64, 65})
    for (int size : {1, 2, 3, 7}) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        const Shard s = shard_of(global, r, size);
        EXPECT_EQ(s.begin, next);
        EXPECT_TRUE(s.count == global / size || s.count == global / size + 1);
        next += s.count;
      }
      EXPECT_EQ(next, global);
    }
  try {
    shard_of(10, 3, 3);
    ADD_FAILURE() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("shard_of: rank 3 of 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(shard_of(-1, 0, 1), std::invalid_argument);
  EXPECT_THROW(shard_of(4, 0, 0), std::invalid_argument);
}

}  // namespace
