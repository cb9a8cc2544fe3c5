// Placement (distributed/affinity.h): CPU lists, the report line, and the warnings on made-up
// placements. The real thing under mpiexec: tests/drivers/test_affinity.sh; under Slurm:
// tests/slurm/test_slurm_local.sh.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include <hddp/distributed/affinity.h>
#include <hddp/kernels/check.h>

using namespace hddp;

namespace {

// Rank `rank` on `host` (16 CPUs) with one thread per entry of `masks`.
RankPlacement rank_on(int rank, const std::string& host, const std::vector<std::vector<int>>& masks, int usable_cpus = 16) {
  RankPlacement p;
  p.rank = rank, p.host = host, p.node = host, p.usable_cpus = usable_cpus;
  for (size_t t = 0; t < masks.size(); ++t) {
    p.threads.push_back({int(t), masks[t].front(), masks[t]});
  }
  p.cpus = p.thread_cpus();
  return p;
}

std::vector<int> range(int lo, int hi) {
  std::vector<int> v;
  for (int c = lo; c <= hi; ++c) v.push_back(c);
  return v;
}

}  // namespace

TEST(CpuList, FormatsRunsAsRanges) {
  EXPECT_EQ(cpu_list({}), "");
  EXPECT_EQ(cpu_list({3}), "3");
  EXPECT_EQ(cpu_list({0, 1}), "0-1");
  EXPECT_EQ(cpu_list({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
}

TEST(CpuList, ParsesTheKernelsFormat) {
  EXPECT_EQ(parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(parse_cpu_list("5"), std::vector<int>{5});
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("8,0-1"), (std::vector<int>{0, 1, 8}));  // sorted, as a mask is
  for (const std::vector<int>& v : {range(0, 0), range(0, 127), std::vector<int>{1, 3, 5, 6, 7, 100}})
    EXPECT_EQ(parse_cpu_list(cpu_list(v)), v);
  for (const char* bad : {"x", "1-", "-1", "3-1", "1,,2", "1;2", " 1", "1234567"})
    EXPECT_THROW(parse_cpu_list(bad), Error) << bad;
}

TEST(PlacementWarnings, DisjointCoresPerRankIsQuiet) {
  // Two ranks per node, 4 cores each, one thread per core (mpiexec --map-by slot:PE=4
  // --bind-to core, OMP_PLACES=cores OMP_PROC_BIND=close).
  std::vector<RankPlacement> r;
  for (int k = 0; k < 2; ++k) {
    std::vector<std::vector<int>> masks;
    for (int c = 4 * k; c < 4 * k + 4; ++c) masks.push_back({c});
    r.push_back(rank_on(k, "a", masks));
  }
  EXPECT_TRUE(placement_warnings(r).empty());
}

TEST(PlacementWarnings, RanksPinnedToTheSameCoreAreNamed) {
  // OMP_PLACES=cores OMP_PROC_BIND=close under mpiexec --bind-to none: every rank's thread on
  // the host's first core (seen with OMP_PLACES=cores under --bind-to none). Ranks 0 and 2 on host a, rank 1 alone on host b.
  const std::vector<RankPlacement> r = {rank_on(0, "a", {{0}}), rank_on(1, "b", {{0}}), rank_on(2, "a", {{0}})};
  const std::vector<std::string> w = placement_warnings(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("ranks 0, 2 on host a are pinned to overlapping CPUs (rank 0 on CPUs 0, rank 2 on CPUs 0): "
                       "2 threads on 1 CPU take turns", 0), 0u) << w[0];
  EXPECT_NE(w[0].find("--map-by slot:PE="), std::string::npos) << w[0];
}

TEST(PlacementWarnings, OverlapIsTransitiveAndPerHost) {
  // 0 and 1 share CPU 1, 1 and 2 share CPU 2: one group of three; host b has its own pair.
  const std::vector<RankPlacement> r = {rank_on(0, "a", {{0}, {1}}), rank_on(1, "a", {{1}, {2}}),
                                        rank_on(2, "a", {{2}, {3}}), rank_on(3, "b", {{5}}), rank_on(4, "b", {{5}}),
                                        rank_on(5, "b", {{7}})};
  const std::vector<std::string> w = placement_warnings(r);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].rfind("ranks 0-2 on host a", 0), 0u) << w[0];
  EXPECT_NE(w[0].find("6 threads on 4 CPUs"), std::string::npos) << w[0];
  EXPECT_EQ(w[1].rfind("ranks 3, 4 on host b", 0), 0u) << w[1];
}

TEST(PlacementWarnings, AnUnpinnedRankDoesNotHideAConflict) {
  // Ranks 0 and 2 pinned to CPU 0; rank 1 free on all 16 CPUs: still 2 threads on CPU 0.
  const std::vector<RankPlacement> r = {rank_on(0, "a", {{0}}), rank_on(1, "a", {range(0, 15)}), rank_on(2, "a", {{0}})};
  const std::vector<std::string> w = placement_warnings(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("ranks 0, 2 on host a are pinned to overlapping CPUs (rank 0 on CPUs 0, rank 2 on CPUs 0)", 0), 0u)
      << w[0];
}

TEST(PlacementWarnings, UnboundInsideACpusetIsNotPinned) {
  // A container or Slurm job cgroup of CPUs 4-5 on a bigger host: 3 unbound ranks, each free on
  // both usable CPUs, are left to the kernel, as on a 2-CPU machine.
  std::vector<RankPlacement> r;
  for (int k = 0; k < 3; ++k) r.push_back(rank_on(k, "a", {{4, 5}}, 2));
  EXPECT_TRUE(placement_warnings(r).empty());
}

TEST(PlacementWarnings, SharedCpusWithRoomForEveryThreadAreFine) {
  // Two unbound ranks inside a job's 8-CPU cpuset on a 16-CPU node, 2 threads each: the
  // kernel spreads 4 threads over 8 CPUs.
  const std::vector<RankPlacement> r = {rank_on(0, "a", {range(0, 7), range(0, 7)}),
                                        rank_on(1, "a", {range(0, 7), range(0, 7)})};
  EXPECT_TRUE(placement_warnings(r).empty());
}

TEST(PlacementWarnings, UnpinnedOversubscriptionIsLeftToTheKernel) {
  // scripts/run.sh on a 2-core machine: 3 ranks x 1 thread free to use the whole host.
  const std::vector<RankPlacement> r = {rank_on(0, "a", {{0, 1}}, 2), rank_on(1, "a", {{0, 1}}, 2),
                                        rank_on(2, "a", {{0, 1}}, 2)};
  EXPECT_TRUE(placement_warnings(r).empty());
}

TEST(PlacementWarnings, MoreThreadsThanCpusIsOneMessageForAllRanks) {
  // -c 16 asked, but each rank bound to one core (Open MPI's default --bind-to core).
  std::vector<RankPlacement> r;
  for (int k = 0; k < 5; ++k) r.push_back(rank_on(k, "n" + std::to_string(k), std::vector<std::vector<int>>(16, {0})));
  const std::vector<std::string> w = placement_warnings(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].rfind("ranks 0-4 run more OpenMP threads than they have CPUs (rank 0 on n0: 16 threads on CPUs 0)", 0),
            0u) << w[0];
  const std::vector<std::string> one = placement_warnings({rank_on(3, "a", {{2}, {2}, {3}})});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].rfind("rank 3 runs more OpenMP threads than it has CPUs (rank 3 on a: 3 threads on CPUs 2-3)", 0), 0u)
      << one[0];
}

TEST(Placement, DescribeSaysWhereEveryThreadIs) {
  RankPlacement p = rank_on(1, "vm", {{2}, {3}});
  p.node = "n2";
  EXPECT_EQ(describe(p, 3),
            "rank 1/3 on node n2 (host vm): CPUs 2-3 of 16; 2 OpenMP threads: t0 on CPU 2 (may use 2) t1 on CPU 3 "
            "(may use 3)");
}

TEST(Placement, SampleSeesThisProcess) {
  omp_set_num_threads(3);
  const RankPlacement p = sample_placement(7);
  EXPECT_EQ(p.rank, 7);
  EXPECT_FALSE(p.host.empty());
  EXPECT_GE(p.usable_cpus, 1);
  ASSERT_EQ(p.threads.size(), 3u);
  ASSERT_FALSE(p.cpus.empty());
  for (size_t t = 0; t < p.threads.size(); ++t) {
    EXPECT_EQ(p.threads[t].thread, int(t));
    ASSERT_FALSE(p.threads[t].allowed.empty());
    // A thread runs on a CPU it may use, and may use only CPUs of the rank.
    EXPECT_NE(std::find(p.threads[t].allowed.begin(), p.threads[t].allowed.end(), p.threads[t].cpu),
              p.threads[t].allowed.end());
    for (int c : p.threads[t].allowed)
      EXPECT_NE(std::find(p.cpus.begin(), p.cpus.end(), c), p.cpus.end()) << "thread " << t << " CPU " << c;
  }
}
