#include "poly_train/run_state.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <hddp/core/checkpoint.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/kernels/elementwise.h>

namespace poly {
namespace {

// hddp::Error messages start with "file.cpp:123: "; users need only the rest.
std::string user_message(const std::string& what) {
  const size_t p = what.find(".cpp:");
  if (p == std::string::npos) return what;
  const size_t q = what.find(": ", p + 5);
  return q == std::string::npos ? what : what.substr(q + 2);
}

std::string exact(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// The verdict of a step every rank took on the same bytes: each rank reached its own, which
// must be the same; rank 0's is returned everywhere, or a general one if only others failed.
std::string agreed(const hddp::mpi::Env& env, std::string err, const std::string& what) {
  int failed = err.empty() ? 0 : 1, any = 0;
  HDDP_MPI(MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, env.comm()));
  err = hddp::mpi::bcast_string(err, 0, env.comm());
  if (any && err.empty()) err = what + " failed on some ranks only";
  return err;
}

}  // namespace

std::string init_weights(const hddp::mpi::Env& env, const std::string& path, hddp::Sequential<float>& model) {
  std::string bytes, err;
  if (env.root()) try {
      bytes = hddp::read_file(path);
    } catch (const hddp::Error& e) {
      err = "--init: " + user_message(e.what());
    }
  err = hddp::mpi::bcast_string(err, 0, env.comm());
  if (!err.empty()) return err;
  bytes = hddp::mpi::bcast_string(std::move(bytes), 0, env.comm());
  try {
    hddp::load_weights(hddp::parse_safetensors(bytes, path), path, model.arena());
  } catch (const hddp::Error& e) {
    err = "--init: " + user_message(e.what());
  }
  return agreed(env, err, "--init: loading '" + path + "'");
}

std::map<std::string, std::string> run_identity(const Options& o, const std::vector<hddp::LayerSpec>& layers) {
  std::string l;
  for (const hddp::LayerSpec& s : layers) l += (l.empty() ? "" : " -> ") + s.name();
  std::map<std::string, std::string> id{{"function", to_string(o.function)},
                                        {"layers", l},
                                        {"optimizer", to_string(o.optimizer)},
                                        {"lr", exact(o.lr)},
                                        {"batch_size", std::to_string(o.batch_size)},
                                        {"sampling", to_string(o.sampling)},
                                        {"seed", std::to_string(o.seed)}};
  if (o.optimizer == OptimizerKind::Sgd) id["momentum"] = exact(o.momentum);
  return id;
}

RunState::RunState(const hddp::mpi::Env& env, const Options& o, hddp::Watchdog& watchdog,
                   hddp::Sequential<float>& model, hddp::Optimizer<float>& opt, hddp::Rng& data,
                   std::map<std::string, std::string> identity)
    : env_(env),
      o_(o),
      watchdog_(watchdog),
      model_(model),
      opt_(opt),
      data_(data),
      identity_(std::move(identity)),
      losses_(size_t(o.epochs)),
      history_(env.root() ? size_t(env.size()) : 0) {}

// Rank 0: the checks that need no file contents, then the file's bytes ("" when there is no
// file to resume from).
std::string RunState::check_and_read(std::string& bytes, bool& read) const {
  const std::string& path = o_.checkpoint;
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const bool exists = hddp::file_exists(path);
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return "--checkpoint: cannot write into directory '" + dir + "': " + std::strerror(errno);
  if (exists && !o_.resume)
    return "--checkpoint: '" + path + "' exists; pass --resume to continue from it, or remove it to start over";
  if (!exists) return "";
  try {
    bytes = hddp::read_file(path);
    read = true;
  } catch (const hddp::Error& e) {
    return "--resume: cannot use checkpoint: " + user_message(e.what());
  }
  return "";
}

// Every rank, from the same bytes: the same checks, the same verdict.
std::string RunState::restore(const std::string& bytes) {
  const std::string& path = o_.checkpoint;
  try {
    const hddp::Checkpoint c = hddp::parse_checkpoint(bytes, path);
    const std::string diff = hddp::identity_diff(c.state, env_.size(), identity_);
    if (!diff.empty())
      return "--resume: '" + path + "' was written by a different run (" + diff +
             "); use the same settings and rank count, or another --checkpoint file";
    if (c.state.epoch > o_.epochs)
      return "--resume: '" + path + "' is at epoch " + std::to_string(c.state.epoch) + ", past --epochs " +
             std::to_string(o_.epochs) + " (--epochs is the total, not a number of extra epochs)";
    hddp::restore_checkpoint(c, path, model_.arena(), opt_);
    start_ = saved_epoch_ = synced_ = c.state.epoch;
    data_.set_state(c.state.rng[size_t(env_.rank())]);
    for (size_t r = 0; r < history_.size(); ++r)
      history_[r].assign(c.state.losses.begin() + int64_t(r) * start_, c.state.losses.begin() + int64_t(r + 1) * start_);
  } catch (const hddp::Error& e) {
    return "--resume: cannot use checkpoint: " + user_message(e.what());
  }
  return "";
}

std::string RunState::resume() {
  if (o_.checkpoint.empty()) return "";
  const MPI_Comm comm = env_.comm();
  std::string bytes, err;
  bool read = false;
  if (env_.root()) err = check_and_read(bytes, read);
  err = hddp::mpi::bcast_string(err, 0, comm);
  if (!err.empty()) return err;
  int have = read ? 1 : 0;
  HDDP_MPI(MPI_Bcast(&have, 1, MPI_INT, 0, comm));
  if (!have) return "";  // no checkpoint yet: start from scratch
  bytes = hddp::mpi::bcast_string(std::move(bytes), 0, comm);
  return agreed(env_, restore(bytes), "--resume: restoring '" + o_.checkpoint + "'");
}

void RunState::sync_losses(int64_t upto) {
  const int n = static_cast<int>(upto - synced_), size = env_.size();
  std::vector<float> buf(env_.root() ? size_t(n) * size_t(size) : 0);
  MPI_Request req;
  HDDP_MPI(MPI_Igather(losses_.data() + synced_, n, MPI_FLOAT, buf.data(), n, MPI_FLOAT, 0, env_.comm(), &req));
  watchdog_.wait(&req, "the gather of the losses");
  for (size_t r = 0; r < history_.size(); ++r)
    history_[r].insert(history_[r].end(), buf.begin() + int64_t(r) * n, buf.begin() + int64_t(r + 1) * n);
  synced_ = upto;
}

bool RunState::state_finite() const {
  if (!hddp::all_finite(model_.num_params(), model_.params())) return false;
  for (const hddp::StateBuffer<float>& b : opt_.state())
    if (!hddp::all_finite(b.size, b.data)) return false;
  return true;
}

void RunState::save(int64_t done) {
  sync_losses(done);
  const int size = env_.size();
  std::vector<uint64_t> all(env_.root() ? 4 * size_t(size) : 0);
  MPI_Request req;
  HDDP_MPI(MPI_Igather(data_.state().data(), 4, MPI_UINT64_T, all.data(), 4, MPI_UINT64_T, 0, env_.comm(), &req));
  watchdog_.wait(&req, "the checkpoint's gather of the RNG states");
  if (env_.root()) {
    hddp::TrainState st;
    st.epoch = done, st.world_size = size, st.identity = identity_;
    st.rng.resize(size_t(size));
    for (int r = 0; r < size; ++r) std::copy(all.begin() + 4 * r, all.begin() + 4 * r + 4, st.rng[size_t(r)].begin());
    st.losses.reserve(size_t(size) * size_t(done));
    for (int r = 0; r < size; ++r) st.losses.insert(st.losses.end(), history_[r].begin(), history_[r].begin() + done);
    hddp::save_checkpoint(o_.checkpoint, model_.arena(), opt_, st);
  }
  // Every rank learns that the file is written (a stall report, from any rank, names the
  // checkpoint kept; a file system that hangs rank 0 here is a stall like any other).
  HDDP_MPI(MPI_Ibarrier(env_.comm(), &req));
  watchdog_.wait(&req, "rank 0's checkpoint write");
  saved_epoch_ = done;
}

std::string RunState::kept_note() const {
  if (o_.checkpoint.empty()) return " (no --checkpoint)";
  if (saved_epoch_ == start_ && !hddp::file_exists(o_.checkpoint)) return " (no checkpoint written yet)";
  return "; the last checkpoint '" + o_.checkpoint + "' (" + std::to_string(saved_epoch_) + " epochs) is kept";
}

}  // namespace poly
