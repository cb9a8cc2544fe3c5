// The stall watchdog (distributed/watchdog.h) under mpiexec with 1, 2 and 3 ranks: waits that end
// normally are untouched, a late rank below the timeout is no stall, and a SIGCONT (every
// rank "stopped and continued") with no stall behind it changes nothing. A real stall
// ends the job, so it is tested through the driver (tests/faults/test_stall.sh).
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <vector>

#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include "tests/distributed/mpi_testing.h"

using namespace hddp;

namespace {

using hddp::testing::world_rank;
using hddp::testing::world_size;

// Sum of (rank + 1) * (i + 1) over the ranks, through the watchdog.
void check_allreduce(Watchdog& wd, int n) {
  const int size = world_size();
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = float((world_rank() + 1) * (i + 1));
  MPI_Request req;
  ASSERT_EQ(MPI_Iallreduce(MPI_IN_PLACE, v.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req), MPI_SUCCESS);
  wd.wait(&req, "the test allreduce", n);
  for (int i = 0; i < n; ++i) ASSERT_EQ(v[i], float(size * (size + 1) / 2 * (i + 1))) << "n " << n << ", i " << i;
}

}  // namespace

TEST(Watchdog, WaitsLikeMpiWaitForEverySize) {
  for (double timeout : {0.0, 30.0}) {
    Watchdog wd(MPI_COMM_WORLD, WatchdogOptions{timeout});
    EXPECT_EQ(wd.enabled(), timeout > 0);
    for (int n : {0, 1, 7, 1000, 100003}) check_allreduce(wd, n);
  }
}

// Rank 0 joins 300 ms late: the others wait (and probe for roll calls) well below the timeout.
TEST(Watchdog, LateRankBelowTheTimeoutIsNoStall) {
  Watchdog wd(MPI_COMM_WORLD, WatchdogOptions{30.0});
  for (int round = 0; round < 3; ++round) {
    if (world_rank() == 0) usleep(300 * 1000);
    wd.set_epoch(round);
    check_allreduce(wd, 5);
  }
}

// Every rank "continued" (as Slurm does before SIGTERM, or on resume after a suspend): with no
// roll call pending nobody timed out on anyone, and the waits go on. Rank 0 joins late, so the
// others are inside a wait when they notice the SIGCONT.
TEST(Watchdog, AfterSigcontWithoutAStallWaitsGoOn) {
  Watchdog wd(MPI_COMM_WORLD, WatchdogOptions{30.0, 5.0});
  raise(SIGCONT);
  for (int round = 0; round < 3; ++round) {
    if (world_rank() == 0) usleep(100 * 1000);
    check_allreduce(wd, 3);
  }
  MPI_Request req;
  ASSERT_EQ(MPI_Ibarrier(MPI_COMM_WORLD, &req), MPI_SUCCESS);
  wd.wait(&req, "the final barrier");
}
