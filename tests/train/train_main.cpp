// main() for the hddp::train suites: one mpi::Env for the whole program (the run kit takes
// one), GoogleTest's report from rank 0 only, and a non-zero exit code on every rank when any
// rank failed. Runs as a plain process (an MPI singleton) or under mpiexec.
#include <gtest/gtest.h>
#include <mpi.h>

#include "tests/train/train_testing.h"

namespace {
hddp::mpi::Env* g_env = nullptr;
}

hddp::mpi::Env& hddp::testing::env() { return *g_env; }

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  hddp::mpi::Env env(&argc, &argv, MPI_THREAD_SERIALIZED);
  g_env = &env;
  // One report, rank 0's; another rank's failure shows in the exit code (its details:
  // --gtest_output=json:FILE per rank).
  if (!env.root()) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
