#pragma once
// MPI_COMM_WORLD helpers of the bench programs (bench_allreduce, bench/at_scale). Plain MPI
// and HDDP_CHECK only: at_scale_sim builds this with SimGrid's smpicxx, without
// distributed/mpi_env.cpp (whose thread levels and MPI_T SMPI lacks).
#include <mpi.h>

#include <hddp/kernels/check.h>

namespace hddp::bench {

inline void mpi_ok(int rc, const char* call) { HDDP_CHECK(rc == MPI_SUCCESS, call << " failed with MPI error " << rc); }

inline int world_rank() {
  int r = 0;
  mpi_ok(MPI_Comm_rank(MPI_COMM_WORLD, &r), "MPI_Comm_rank");
  return r;
}
inline int world_size() {
  int s = 1;
  mpi_ok(MPI_Comm_size(MPI_COMM_WORLD, &s), "MPI_Comm_size");
  return s;
}
// v reduced over the ranks with op, on every rank.
inline double over_ranks(double v, MPI_Op op) {
  mpi_ok(MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, op, MPI_COMM_WORLD), "MPI_Allreduce");
  return v;
}
inline double max_over_ranks(double v) { return over_ranks(v, MPI_MAX); }
inline double mean_over_ranks(double v) { return over_ranks(v, MPI_SUM) / world_size(); }

}  // namespace hddp::bench
