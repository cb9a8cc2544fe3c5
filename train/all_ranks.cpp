#include <hddp/train/all_ranks.h>

#include <algorithm>
#include <cstdio>

#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>

namespace hddp {

namespace {
// A message sent to every rank is at most 4 KiB (the readers quote at most 200 bytes of their
// input; this bounds whatever else a message may carry).
constexpr size_t kMaxMessage = 4096;
std::string bounded(const std::string& err) {
  if (err.size() <= kMaxMessage) return err;
  return err.substr(0, kMaxMessage) + "... (" + std::to_string(err.size()) + " bytes)";
}
}  // namespace

std::string agree_on_error(const mpi::Env& env, const std::string& err) {
  const int mine = err.empty() ? env.size() : env.rank();
  int first = 0;
  HDDP_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, env.comm()));
  if (first == env.size()) return "";
  const std::string msg = mpi::bcast_string(bounded(err), first, env.comm());
  return first == 0 ? msg : "rank " + std::to_string(first) + ": " + msg;
}

namespace {
constexpr int64_t kChunk = int64_t(1) << 30;  // MPI counts are int
}  // namespace

std::string watched_bcast_string(const mpi::Env& env, Watchdog& watchdog, std::string s, int root, const char* what) {
  int64_t len = int64_t(s.size());
  MPI_Request req;
  HDDP_MPI(MPI_Ibcast(&len, 1, MPI_INT64_T, root, env.comm(), &req));
  watchdog.wait(&req, what);
  s.resize(size_t(len));
  for (int64_t at = 0; at < len; at += kChunk) {
    HDDP_MPI(MPI_Ibcast(s.data() + at, int(std::min(kChunk, len - at)), MPI_CHAR, root, env.comm(), &req));
    watchdog.wait(&req, what);
  }
  return s;
}

std::string agree_on_error(const mpi::Env& env, Watchdog& watchdog, const std::string& err) {
  const int mine = err.empty() ? env.size() : env.rank();
  int first = 0;
  MPI_Request req;
  HDDP_MPI(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, env.comm(), &req));
  watchdog.wait(&req, "the ranks' agreement on the start-up");
  if (first == env.size()) return "";
  const std::string msg = watched_bcast_string(env, watchdog, bounded(err), first, "the ranks' agreement on the start-up");
  return first == 0 ? msg : "rank " + std::to_string(first) + ": " + msg;
}

int finish_together(const mpi::Env& env, Watchdog& watchdog, Exit code) {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Request req;
  HDDP_MPI(MPI_Ibarrier(env.comm(), &req));
  watchdog.wait(&req, "the barrier before stopping");
  return hddp::code(code);
}

std::string load_weights_everywhere(const mpi::Env& env, Watchdog& watchdog, const std::string& path,
                                    ParamArena<float>& params, const std::string& flag) {
  std::string bytes, err;
  if (env.root()) try {
      test_pause("init-read");
      bytes = read_file(path);
    } catch (const Error& e) {
      err = flag + ": " + user_message(e.what());
    }
  err = watched_bcast_string(env, watchdog, err, 0, "the broadcast of the --init weights");
  if (!err.empty()) return err;
  bytes = watched_bcast_string(env, watchdog, std::move(bytes), 0, "the broadcast of the --init weights");
  try {
    load_weights(parse_safetensors(bytes, path), path, params);
  } catch (const Error& e) {
    err = flag + ": " + user_message(e.what());
  }
  return agree_on_error(env, watchdog, err);
}

}  // namespace hddp
