// main() for GoogleTest suites run under mpiexec: MPI is initialised once for all tests (with
// MPI_THREAD_SERIALIZED, so both progress strategies can be tested) and the exit code is
// non-zero on every rank if any rank failed, so mpiexec reports the failure.
#include <gtest/gtest.h>
#include <mpi.h>

#include <hddp/distributed/mpi_env.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  hddp::mpi::Env env(&argc, &argv, MPI_THREAD_SERIALIZED);
  if (!env.root()) {  // one report is enough; failures on other ranks still print
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = RUN_ALL_TESTS() != 0, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any;
}
