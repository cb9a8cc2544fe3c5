#pragma once
// Start-up steps every driver takes the same way (poly_train, mnist_train): the OpenMP threads
// of a rank, the ranks' agreement on their parse, a writable output directory. Header-only.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "distributed/mpi_env.h"

namespace hddp::drivers {

// OpenMP threads per rank: `requested` if > 0, else OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK,
// else this node's cores divided among the ranks on it.
inline int resolve_threads(int requested) {
  if (requested > 0) return requested;
  for (const char* var : {"OMP_NUM_THREADS", "SLURM_CPUS_PER_TASK"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  int local = 1;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(v));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / local);
}

// Rank 0 checks that a directory is (or can be made) writable; every rank learns the verdict
// ("" or the error, naming `flag`).
inline std::string check_out_dir(const mpi::Env& env, const std::string& dir, const char* flag = "--out") {
  std::string err;
  if (env.root()) {
    struct stat st{};
    if (stat(dir.c_str(), &st) != 0 && mkdir(dir.c_str(), 0755) != 0)
      err = std::string(flag) + ": cannot create directory '" + dir + "'";
    else if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      err = std::string(flag) + ": '" + dir + "' is not a directory";
    else if (access(dir.c_str(), W_OK) != 0)
      err = std::string(flag) + ": directory '" + dir + "' is not writable";
  }
  return mpi::bcast_string(err, 0, env.comm());
}

// Every rank parsed its own command line (and --config file) before MPI started: the verdict
// and what was parsed must be the same everywhere, else the ranks would part ways (one exits,
// the others wait for it in their first collective). "" or the error, the same on every rank.
inline std::string agree_on_options(const mpi::Env& env, const std::string& err, uint64_t source_hash) {
  int failed = err.empty() ? 0 : 1, any = 0;
  uint64_t lo = 0, hi = 0;
  HDDP_MPI(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, env.comm()));
  HDDP_MPI(MPI_Allreduce(&source_hash, &lo, 1, MPI_UINT64_T, MPI_MIN, env.comm()));
  HDDP_MPI(MPI_Allreduce(&source_hash, &hi, 1, MPI_UINT64_T, MPI_MAX, env.comm()));
  const std::string root = mpi::bcast_string(err, 0, env.comm());
  if (!root.empty()) return root;
  if (any) return "the options could not be parsed on every rank (a --config file on a node-local path?)";
  if (lo != hi) return "the command line or the --config file differs between ranks; give every rank the same";
  return "";
}

// A verdict every rank reached on its own (each read a file, say): "" when all succeeded, else
// the first failing rank's message, prefixed with its rank when it is not rank 0.
inline std::string agree_on_error(const mpi::Env& env, const std::string& err) {
  const int mine = err.empty() ? env.size() : env.rank();
  int first = 0;
  HDDP_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, env.comm()));
  if (first == env.size()) return "";
  const std::string msg = mpi::bcast_string(err, first, env.comm());
  return first == 0 ? msg : "rank " + std::to_string(first) + ": " + msg;
}

}  // namespace hddp::drivers
