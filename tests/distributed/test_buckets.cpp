// Bucket assignment: a pure function, tested without MPI.
#include <gtest/gtest.h>

#include <hddp/data/sampler.h>
#include <hddp/distributed/buckets.h>

using namespace hddp;

namespace {

std::vector<ParamSlice> layout(std::vector<int64_t> sizes) {
  std::vector<ParamSlice> l;
  int64_t off = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ParamSlice p;
    p.name = std::to_string(i);
    p.offset = off;
    p.size = sizes[i];
    l.push_back(p);
    off += sizes[i];
  }
  return l;
}

// Buckets tile the arena from the end backwards, hold whole parameters, and respect the caps
// unless a single parameter is bigger.
void check_invariants(const std::vector<ParamSlice>& l, const std::vector<Bucket>& b, int64_t cap, int64_t first) {
  const int64_t total = l.empty() ? 0 : l.back().offset + l.back().size;
  int64_t end = total;
  int expect_param = int(l.size()) - 1;
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].end, end) << "bucket " << i;
    for (int p : b[i].params) EXPECT_EQ(p, expect_param--) << "bucket " << i;
    EXPECT_EQ(b[i].begin, l[b[i].params.back()].offset);
    const int64_t c = i == 0 ? first : cap;
    if (b[i].params.size() > 1) {
      EXPECT_LE(b[i].size() * 4, c) << "bucket " << i;
    }
    end = b[i].begin;
  }
  EXPECT_EQ(end, 0);
  EXPECT_EQ(expect_param, -1);
}

TEST(Buckets, EmptyAndSingle) {
  EXPECT_TRUE(assign_buckets({}, 4, 100, 100).empty());
  auto b = assign_buckets(layout({1}), 4, 100, 100);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].end, 1);
}

TEST(Buckets, FirstBucketSmallerThenCap) {
  // sizes in floats; first cap 40 bytes (10 floats), cap 100 bytes (25 floats)
  auto l = layout({20, 5, 7, 3, 6, 4});
  auto b = assign_buckets(l, 4, 100, 40);
  check_invariants(l, b, 100, 40);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].params, (std::vector<int>{5, 4}));     // 4 + 6 = 10 floats
  EXPECT_EQ(b[1].params, (std::vector<int>{3, 2, 1}));  // 3 + 7 + 5 = 15 (+20 would be 35 > 25)
  EXPECT_EQ(b[2].params, (std::vector<int>{0}));
}

TEST(Buckets, OnePerParameterAndOneForAll) {
  auto l = layout({3, 1, 4, 1, 5, 9, 2, 6});
  auto one_each = assign_buckets(l, 4, 1, 1);
  EXPECT_EQ(one_each.size(), l.size());
  check_invariants(l, one_each, 1, 1);
  auto all = assign_buckets(l, 4, int64_t(1) << 30, int64_t(1) << 30);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].begin, 0);
  EXPECT_EQ(all[0].end, 31);
}

TEST(Buckets, OddCapsKeepInvariants) {
  for (int64_t cap : {4, 8, 12, 36, 148, 1000})
    for (int64_t first : {4, 20, 4096}) {
      auto l = layout({17, 1, 0, 33, 2, 64, 5});
      check_invariants(l, assign_buckets(l, 4, cap, first), cap, first);
    }
}

TEST(Buckets, BadLayoutOrCapsThrow) {
  auto l = layout({3, 4});
  EXPECT_THROW(assign_buckets(l, 4, 0, 10), std::invalid_argument);
  EXPECT_THROW(assign_buckets(l, 4, 10, -1), std::invalid_argument);
  l[1].offset = 5;  // gap
  EXPECT_THROW(assign_buckets(l, 4, 10, 10), std::invalid_argument);
}

TEST(Shard, CoversTheBatchOnce) {
  for (int64_t global : {0, 1, 2, 5, 32, 96, 97})
    for (int size : {1, 2, 3, 7}) {
      int64_t next = 0;
      for (int r = 0; r < size; ++r) {
        Shard s = shard_of(global, r, size);
        EXPECT_EQ(s.begin, next);
        EXPECT_LE(s.count, global / size + 1);
        EXPECT_GE(s.count, global / size);
        next += s.count;
      }
      EXPECT_EQ(next, global);
    }
  EXPECT_THROW(shard_of(10, 3, 3), std::invalid_argument);
}

}  // namespace
