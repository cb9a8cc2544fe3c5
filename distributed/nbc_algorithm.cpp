#include <hddp/distributed/nbc_algorithm.h>

#include <hddp/distributed/mpi_env.h>

namespace hddp {

NbcAlgorithm::NbcAlgorithm() {
  // MPI_T at the thread level MPI already provides: Open MPI lowers MPI_Query_thread's answer
  // to the level MPI_T is initialised with.
  int level = 0, provided = 0, index = -1, count = 0;
  HDDP_MPI(MPI_Query_thread(&level));
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return;
  mpi_t_ = true;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) return;  // not Open MPI
  if (MPI_T_cvar_handle_alloc(index, nullptr, &handle_, &count) != MPI_SUCCESS) {
    handle_ = MPI_T_CVAR_HANDLE_NULL;
    return;
  }
  // Only an unset variable (0) is ours to change; every rank reads the same environment.
  settable_ = count == 1 && MPI_T_cvar_read(handle_, &found_) == MPI_SUCCESS && found_ == kNbcLibnbcChoice;
}

NbcAlgorithm::~NbcAlgorithm() {
  restore();
  if (handle_ != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_handle_free(&handle_);
  if (mpi_t_) MPI_T_finalize();
}

bool NbcAlgorithm::set(int algorithm) {
  if (!settable_) return false;
  HDDP_MPI(MPI_T_cvar_write(handle_, &algorithm));
  changed_ = true;
  return true;
}

void NbcAlgorithm::restore() {
  if (!changed_) return;
  MPI_T_cvar_write(handle_, &found_);  // no throw: also runs in the destructor
  changed_ = false;
}

std::string NbcAlgorithm::current() const {
  int v = -1;
  if (handle_ == MPI_T_CVAR_HANDLE_NULL || MPI_T_cvar_read(handle_, &v) != MPI_SUCCESS) return "n/a";
  return std::to_string(v);
}

}  // namespace hddp
