#include <hddp/train/run_file.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <hddp/core/checkpoint.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {

std::string user_message(const std::string& what) {
  const size_t p = what.find(".cpp:");
  if (p == std::string::npos) return what;
  const size_t q = what.find(": ", p + 5);
  return q == std::string::npos ? what : what.substr(q + 2);
}

std::string agree_on_error(const mpi::Env& env, const std::string& err) {
  const int mine = err.empty() ? env.size() : env.rank();
  int first = 0;
  HDDP_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, env.comm()));
  if (first == env.size()) return "";
  const std::string msg = mpi::bcast_string(err, first, env.comm());
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

namespace {

template <class T>
std::string encode(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

template <class T>
std::vector<T> decode(const std::string& bytes, const std::string& what) {
  HDDP_CHECK(bytes.size() % sizeof(T) == 0, what << ": " << bytes.size() << " bytes, not a whole number of "
                                                 << sizeof(T) << "-byte values");
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

}  // namespace

std::string encode_floats(const std::vector<float>& v) { return encode(v); }
std::vector<float> decode_floats(const std::string& bytes, const std::string& what) { return decode<float>(bytes, what); }
std::string encode_doubles(const std::vector<double>& v) { return encode(v); }
std::vector<double> decode_doubles(const std::string& bytes, const std::string& what) { return decode<double>(bytes, what); }

std::string load_weights_everywhere(const mpi::Env& env, const std::string& path, ParamArena<float>& params,
                                    const std::string& flag) {
  std::string bytes, err;
  if (env.root()) try {
      bytes = read_file(path);
    } catch (const Error& e) {
      err = flag + ": " + user_message(e.what());
    }
  err = mpi::bcast_string(err, 0, env.comm());
  if (!err.empty()) return err;
  bytes = mpi::bcast_string(std::move(bytes), 0, env.comm());
  try {
    load_weights(parse_safetensors(bytes, path), path, params);
  } catch (const Error& e) {
    err = flag + ": " + user_message(e.what());
  }
  return agree_on_error(env, err);
}

RunFile::RunFile(const mpi::Env& env, Watchdog& watchdog, RunFileOptions options)
    : env_(env), watchdog_(watchdog), o_(std::move(options)) {
  watchdog_.set_note([this] {
    const std::string k = kept_note();
    return k + (k.rfind("; ", 0) == 0 ? ": continue with --resume" : "");
  });
}

RunFile::~RunFile() { watchdog_.set_note(nullptr); }

// Rank 0: the checks that need no file contents, then the file's bytes (none when there is no
// file to resume from).
std::string RunFile::check_and_read(std::string& bytes, bool& read) const {
  const std::string& path = o_.path;
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const bool exists = file_exists(path);
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return o_.flag + ": cannot write into directory '" + dir + "': " + std::strerror(errno);
  if (exists && !o_.resume)
    return o_.flag + ": '" + path + "' exists; pass --resume to continue from it, or remove it to start over";
  if (!exists) return "";
  try {
    bytes = read_file(path);
    read = true;
  } catch (const Error& e) {
    return "--resume: cannot use checkpoint: " + user_message(e.what());
  }
  return "";
}

// Every rank, from the same bytes: the same checks, the same verdict.
std::string RunFile::restore(const std::string& bytes, ParamArena<float>& params, Optimizer<float>& opt, Rng* rng) {
  const std::string& path = o_.path;
  try {
    const Checkpoint c = parse_checkpoint(bytes, path);
    const std::string diff = identity_diff(c.state, env_.size(), o_.identity);
    if (!diff.empty())
      return "--resume: '" + path + "' was written by a different run (" + diff +
             "); use the same settings and rank count, or another " + o_.flag + " file";
    if (c.state.step > o_.total_steps)
      return "--resume: '" + path + "' holds " + std::to_string(c.state.step) + " " + o_.unit + " done, past this run's " +
             std::to_string(o_.total_steps) + " (--epochs is the total, not a number of extra epochs)";
    if (rng && c.state.rng.empty())
      return "--resume: '" + path + "' holds no per-rank RNG states, which this program needs";
    restore_checkpoint(c, path, params, opt);
    if (rng) rng->set_state(c.state.rng[size_t(env_.rank())]);
    start_ = saved_step_ = c.state.step;
    records_ = c.state.records;
  } catch (const Error& e) {
    return "--resume: cannot use checkpoint: " + user_message(e.what());
  }
  return "";
}

std::string RunFile::resume(ParamArena<float>& params, Optimizer<float>& opt, Rng* rng) {
  if (o_.path.empty()) return "";
  const MPI_Comm comm = env_.comm();
  std::string bytes, err;
  bool read = false;
  if (env_.root()) err = check_and_read(bytes, read);
  err = mpi::bcast_string(err, 0, comm);
  if (!err.empty()) return err;
  int have = read ? 1 : 0;
  HDDP_MPI(MPI_Bcast(&have, 1, MPI_INT, 0, comm));
  if (!have) return "";  // no checkpoint yet: start from scratch
  bytes = mpi::bcast_string(std::move(bytes), 0, comm);
  return agree_on_error(env_, restore(bytes, params, opt, rng));
}

bool RunFile::finite(const ParamArena<float>& params, Optimizer<float>& opt) {
  if (!all_finite(params.size(), params.params())) return false;
  for (const StateBuffer<float>& b : opt.state())
    if (!all_finite(b.size, b.data)) return false;
  return true;
}

void RunFile::save(int64_t steps_done, const ParamArena<float>& params, Optimizer<float>& opt, const Rng* rng,
                   const std::map<std::string, std::string>& records) {
  if (o_.path.empty()) return;
  const int size = env_.size();
  MPI_Request req;
  std::vector<uint64_t> all(env_.root() && rng ? 4 * size_t(size) : 0);
  if (rng) {
    HDDP_MPI(MPI_Igather(rng->state().data(), 4, MPI_UINT64_T, all.data(), 4, MPI_UINT64_T, 0, env_.comm(), &req));
    watchdog_.wait(&req, "the checkpoint's gather of the RNG states");
  }
  if (env_.root()) {
    TrainState st;
    st.step = steps_done, st.world_size = size, st.identity = o_.identity, st.records = records;
    st.rng.resize(rng ? size_t(size) : 0);
    for (size_t r = 0; r < st.rng.size(); ++r) std::copy(all.begin() + 4 * r, all.begin() + 4 * r + 4, st.rng[r].begin());
    save_checkpoint(o_.path, params, opt, st);
  }
  // Every rank learns that the file is written (a stall report, from any rank, names the
  // checkpoint kept; a file system that hangs rank 0 here is a stall like any other).
  HDDP_MPI(MPI_Ibarrier(env_.comm(), &req));
  watchdog_.wait(&req, "rank 0's checkpoint write");
  saved_step_ = steps_done;
}

std::string RunFile::kept_note() const {
  if (o_.path.empty()) return " (no " + o_.flag + ")";
  if (saved_step_ == start_ && !file_exists(o_.path)) return " (no checkpoint written yet)";
  return "; the last checkpoint '" + o_.path + "' (" + std::to_string(saved_step_) + " " + o_.unit + ") is kept";
}

}  // namespace hddp
