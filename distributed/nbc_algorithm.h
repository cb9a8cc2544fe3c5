#pragma once
// Open MPI's coll/libnbc MPI_Iallreduce algorithm, the MCA variable
// coll_libnbc_iallreduce_algorithm, read and written through MPI_T: 0 = libnbc's own choice
// (the binomial tree for every in-place call and below 4 ranks: rank 0 receives and sums
// everything, then sends the result back), 1 ring, 2 binomial, 3 rabenseifner (reduce-scatter +
// allgather), 4 recursive doubling. bench/results/allreduce.md measures them.
//
// One RAII guard, used by the reducer (around each bucket's launch) and the allreduce
// benchmark (for a whole benchmark): MPI_T is initialised for the guard's lifetime and the
// variable restored on destruction. The variable is only ever changed when it was unset (0):
// a value from the environment (OMPI_MCA_coll_libnbc_iallreduce_algorithm, mpiexec --mca) wins.
// On an MPI without the variable every call is a no-op that returns false.
#include <mpi.h>

#include <string>

namespace hddp {

inline constexpr int kNbcLibnbcChoice = 0, kNbcBinomial = 2, kNbcRabenseifner = 3;

class NbcAlgorithm {
 public:
  NbcAlgorithm();  // MPI must be initialised; changes nothing yet
  ~NbcAlgorithm();  // restores the value found, finalises MPI_T
  NbcAlgorithm(const NbcAlgorithm&) = delete;
  NbcAlgorithm& operator=(const NbcAlgorithm&) = delete;

  // Whether the variable exists and was unset, i.e. set() can change it.
  bool settable() const { return settable_; }
  // Makes `algorithm` libnbc's choice for the MPI_Iallreduce calls that start from now on
  // (libnbc reads the variable when a call starts); false when not settable().
  bool set(int algorithm);
  // Back to the value found (libnbc's own choice).
  void restore();
  // The value in force: "n/a" on an MPI without the variable.
  std::string current() const;

 private:
  MPI_T_cvar_handle handle_ = MPI_T_CVAR_HANDLE_NULL;
  int found_ = 0;
  bool mpi_t_ = false, settable_ = false, changed_ = false;
};

}  // namespace hddp
