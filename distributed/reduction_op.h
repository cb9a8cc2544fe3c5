#pragma once
// The reducer's MPI reduction op, internal (not installed): the reducer and the benchmarks that
// time the calls it makes share it. With 2 ranks the op averages (see reducer_wire.cpp);
// otherwise it is MPI_SUM and the reducer scales by 1/P once every bucket is complete.
#include <mpi.h>

namespace hddp {

// The op for `ranks` ranks: a new op for 2 (free it with free_reduction_op), else MPI_SUM.
MPI_Op make_reduction_op(int ranks);
// Frees an op make_reduction_op created (MPI_SUM is left alone); safe after MPI_Finalize.
void free_reduction_op(MPI_Op& op);

}  // namespace hddp
