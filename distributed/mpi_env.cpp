#include <hddp/distributed/mpi_env.h>

#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdlib>

namespace hddp::mpi {

void check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) std::snprintf(msg, sizeof msg, "error code %d", rc);
  throw MpiError(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + msg);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    s += (s.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) s += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    i = j + 1;
  }
  return s;
}

void bcast_chunked(void* data, int64_t n, MPI_Datatype type, int root, MPI_Comm comm) {
  constexpr int64_t kChunk = int64_t(1) << 30;
  int type_size = 0;
  HDDP_MPI(MPI_Type_size(type, &type_size));
  char* p = static_cast<char*>(data);
  for (int64_t off = 0; off < n; off += kChunk)
    HDDP_MPI(MPI_Bcast(p + off * type_size, static_cast<int>(std::min(n - off, kChunk)), type, root, comm));
}

std::string bcast_string(std::string s, int root, MPI_Comm comm) {
  int64_t len = static_cast<int64_t>(s.size());
  HDDP_MPI(MPI_Bcast(&len, 1, MPI_INT64_T, root, comm));
  s.resize(static_cast<size_t>(len));
  bcast_chunked(s.data(), len, MPI_CHAR, root, comm);
  return s;
}

std::vector<std::string> gather_strings(const std::string& mine, int root, MPI_Comm comm) {
  int rank = 0, size = 1;
  HDDP_MPI(MPI_Comm_rank(comm, &rank));
  HDDP_MPI(MPI_Comm_size(comm, &size));
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(rank == root ? size : 0), displs(lens.size());  // root only: per rank
  HDDP_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, comm));
  std::string all;
  if (rank == root) {
    for (int r = 0, off = 0; r < size; ++r) displs[r] = off, off += lens[r];
    all.resize(static_cast<size_t>(displs.back() + lens.back()));
  }
  HDDP_MPI(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, root, comm));
  std::vector<std::string> out;
  for (size_t r = 0; r < lens.size(); ++r) out.push_back(all.substr(size_t(displs[r]), size_t(lens[r])));
  return out;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

Env::Env(int* argc, char*** argv, int required) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  HDDP_CHECK(!initialized, "hddp::mpi::Env: MPI is already initialised (one Env per process)");
  HDDP_MPI(MPI_Init_thread(argc, argv, required, &provided_));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (provided_ < required) {
    const std::string msg = std::string("MPI provides ") + thread_level_name(provided_) + " but " +
                            thread_level_name(required) +
                            " is needed; use an MPI built with thread support (Open MPI: "
                            "ompi_info | grep 'Thread support') or another progress strategy";
    MPI_Finalize();
    throw MpiError(msg);
  }
  HDDP_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
  HDDP_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size_));
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  host_ = host;
}

Env::~Env() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void abort_all(int code, const std::string& what) {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fflush(stdout);
  // One write(2): std::cerr is unbuffered, so "<<" pieces reach mpiexec as separate chunks and
  // the MPI_Abort banner (sent on another channel) can land between them (seen in CI).
  const std::string line = (rank >= 0 ? "[rank " + std::to_string(rank) + "] " : std::string()) + "error: " + what + "\n";
  for (size_t done = 0; done < line.size();) {
    const ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n <= 0) break;
    done += size_t(n);
  }
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

}  // namespace hddp::mpi
