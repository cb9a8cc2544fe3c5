#pragma once
// MPI environment: RAII initialisation, checked calls, rank-0 printing, abort-all.
// Works without mpiexec too: a plain process is an MPI singleton (world size 1).
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <hddp/kernels/check.h>

namespace hddp::mpi {

// An MPI call that returned an error; what() carries MPI_Error_string.
struct MpiError : Error {
  using Error::Error;
};

// Throws MpiError "file:line: <call> failed: <MPI_Error_string>" when rc != MPI_SUCCESS.
void check(int rc, const char* call, const char* file, int line);

// HDDP_MPI(MPI_Allreduce(...)); (the communicators hddp uses return errors instead of aborting)
#define HDDP_MPI(call) ::hddp::mpi::check((call), #call, __FILE__, __LINE__)

const char* thread_level_name(int level);

// "0, 2, 5-9": ascending ranks, runs of three or more as ranges (a message about 1024 ranks
// stays one line).
std::string rank_list(const std::vector<int>& ranks);

// MPI_Bcast of n elements of `type` from `root`, in chunks of at most 2^30 (MPI counts are
// int), so arenas of any size go in one call.
void bcast_chunked(void* data, int64_t n, MPI_Datatype type, int root, MPI_Comm comm);

// A string from `root` to every rank (its length first); returns it on every rank.
std::string bcast_string(std::string s, int root, MPI_Comm comm);

// One string per rank to `root` (the lengths first, then one MPI_Gatherv): on `root`, `size`
// strings in rank order; on every other rank an empty vector. Collective over `comm`; the
// total length must fit an int (MPI counts).
std::vector<std::string> gather_strings(const std::string& mine, int root, MPI_Comm comm);

class Env {
 public:
  // Initialises MPI with at least `required` thread support (MPI_THREAD_FUNNELED,
  // _SERIALIZED or _MULTIPLE) and throws if the library provides less. Errors on
  // MPI_COMM_WORLD are returned (MPI_ERRORS_RETURN) and turned into exceptions by HDDP_MPI.
  explicit Env(int* argc, char*** argv, int required = MPI_THREAD_FUNNELED);
  ~Env();  // MPI_Finalize, unless the process is already aborting
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool root() const { return rank_ == 0; }
  int thread_level() const { return provided_; }
  MPI_Comm comm() const { return MPI_COMM_WORLD; }
  const std::string& hostname() const { return host_; }

 private:
  int rank_ = 0, size_ = 1, provided_ = 0;
  std::string host_;
};

// The error path of every driver: prints "[rank r] error: <what>" to stderr and ends every
// rank with MPI_Abort(MPI_COMM_WORLD, code). Never returns. Safe before MPI_Init (exits).
[[noreturn]] void abort_all(int code, const std::string& what);

}  // namespace hddp::mpi
