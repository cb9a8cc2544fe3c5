// The stall watchdog's report (distributed/watchdog.h): who did not arrive, where the others wait.
// The roll call itself runs under mpiexec (tests/distributed/test_watchdog_mpi.cpp, tests/faults/test_stall.sh).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include <hddp/distributed/watchdog.h>

using namespace hddp;

namespace {

RankPosition at(int64_t epoch, const char* what, double waited) {
  RankPosition p;
  p.epoch = epoch, p.waited_s = waited;
  std::snprintf(p.what, sizeof p.what, "%s", what);
  return p;
}

std::vector<std::string> nodes(int n) {
  std::vector<std::string> v;
  for (int r = 0; r < n; ++r) v.push_back(std::string(1, 'n').append(std::to_string(r + 1)));
  return v;
}

}  // namespace

TEST(StallReport, NamesTheMissingRankAndTheWaitingOnes) {
  std::vector<char> answered{1, 0, 1};
  std::vector<RankPosition> where{at(1234, "the allreduce of bucket 0", 5.02), {}, at(1234, "the allreduce of bucket 0", 4.9)};
  const std::string r = stall_report(0, answered, where, nodes(3), 5, 5);
  EXPECT_EQ(r.substr(0, r.find('\n')),
            "stall: rank 0 (node n1) waited 5.0 s (timeout 5 s) for the allreduce of bucket 0 at epoch 1234; rank 1 did "
            "not arrive or stopped responding (no answer to the roll call within 5.0 s: stopped, hung, dead, or far behind)");
  EXPECT_NE(r.find("\n  rank 1 (node n2): no answer"), std::string::npos) << r;
  EXPECT_NE(r.find("\n  waiting for the allreduce of bucket 0 at epoch 1234: ranks 0, 2"), std::string::npos) << r;
}

TEST(StallReport, GroupsRanksByWhereTheyWaitWithRanges) {
  const int n = 12;
  std::vector<char> answered(n, 1);
  answered[4] = answered[9] = 0;
  std::vector<RankPosition> where(n, at(7, "the ranks' agreement (signals, NaN)", 1));
  where[10] = where[11] = at(6, "the allreduce of bucket 2", 1);
  const std::string r = stall_report(3, answered, where, nodes(n), 300, 5);
  EXPECT_NE(r.find("ranks 4, 9 did not arrive"), std::string::npos) << r;
  EXPECT_NE(r.find("\n  rank 4 (node n5): no answer\n  rank 9 (node n10): no answer"), std::string::npos) << r;
  EXPECT_NE(r.find("waiting for the ranks' agreement (signals, NaN) at epoch 7: ranks 0-3, 5-8"), std::string::npos) << r;
  EXPECT_NE(r.find("waiting for the allreduce of bucket 2 at epoch 6: ranks 10, 11"), std::string::npos) << r;
}

TEST(StallReport, EveryRankAnswered) {
  std::vector<char> answered{1, 1};
  std::vector<RankPosition> where{at(3, "x", 301), at(3, "x", 300)};
  const std::string r = stall_report(1, answered, where, nodes(2), 300, 5);
  EXPECT_NE(r.find("every rank answered the roll call, but the collective did not complete"), std::string::npos) << r;
  EXPECT_NE(r.find("waiting for x at epoch 3: ranks 0, 1"), std::string::npos) << r;
}
