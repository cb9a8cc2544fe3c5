#include <hddp/train/run_file.h>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <hddp/core/checkpoint.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/serialize.h>
#include <hddp/core/util.h>
#include <hddp/train/all_ranks.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {

RunFile::RunFile(const mpi::Env& env, Watchdog& watchdog, RunFileOptions options)
    : env_(env), watchdog_(watchdog), o_(std::move(options)), from_(o_.path) {
  watchdog_.set_note([this] {
    const std::string k = kept_note();
    return k + (k.rfind("; ", 0) == 0 ? ": " + continue_hint() : "");
  });
}

RunFile::~RunFile() { watchdog_.set_note(nullptr); }

// Rank 0: the checks that need no file contents, stale temporaries removed, then the bytes of
// the checkpoint to resume from (none when there is none): the newest when it is a well-formed
// checkpoint, else the previous one, with a warning naming both.
std::string RunFile::check_and_read(std::string& bytes, bool& read) {
  const std::string& path = o_.path;
  const std::string prev = previous_checkpoint(path);
  const bool have_newest = file_exists(path), have_prev = file_exists(prev);
  const std::string ck = o_.names.checkpoint_or("checkpoint");
  if (const std::string err = file_creation_error(path); !err.empty()) return ck + ": " + err;
  if ((have_newest || have_prev) && !o_.resume)
    return ck + ": '" + (have_newest ? path : prev) + "' exists; " +
           (o_.names.resume.empty() ? "resume from it" : "pass " + o_.names.resume + " to continue from it") +
           ", or remove it to start over";
  // Nothing of this run writes yet: every temporary of the path is a killed writer's.
  for (const std::string& t : remove_stale_temporaries(path, true))
    std::fprintf(stderr, "%s: removed '%s', left by an interrupted checkpoint write\n", ck.c_str(), t.c_str());
  if (!have_newest && !have_prev) return "";
  test_pause("resume-read");
  // A file is usable when it reads and parses as a checkpoint (format, checksum, entries);
  // whether it fits this run is decided by every rank in restore().
  auto usable = [](const std::string& file, std::string& out, std::string& why) {
    try {
      out = read_file(file);
      parse_checkpoint(out, file);
      return true;
    } catch (const Error& e) {
      why = user_message(e.what());
      return false;
    }
  };
  std::string why_newest = "'" + path + "' is missing (a save was interrupted between its two renames)", why_prev;
  if (have_newest && usable(path, bytes, why_newest)) {
    read = true;
    return "";
  }
  const std::string res = o_.names.resume_or("resume");
  if (!have_prev) return res + ": cannot use checkpoint: " + why_newest;
  if (!usable(prev, bytes, why_prev))
    return res + ": cannot use checkpoint '" + path + "' nor the previous one '" + prev + "': " + why_newest +
           "; " + why_prev;
  read = true;
  from_ = prev;
  // A damaged newest is replaced by the next save, which keeps the good previous one.
  keep_previous_ = !have_newest;
  std::fprintf(stderr, "%s: warning: %s; resuming from the previous checkpoint '%s'\n", ck.c_str(),
               why_newest.c_str(), prev.c_str());
  std::fflush(stderr);
  return "";
}

// Every rank, from the same bytes: the same checks, the same verdict.
std::string RunFile::restore(const std::string& bytes, ParamArena<float>& params, Optimizer<float>& opt, Rng* rng) {
  const std::string& path = from_;
  const std::string res = o_.names.resume_or("resume");
  try {
    const Checkpoint c = parse_checkpoint(bytes, path);
    const std::string diff = identity_diff(c.state, env_.size(), o_.identity);
    if (!diff.empty())
      return res + ": '" + path + "' was written by a different run (" + diff +
             "); use the same settings and rank count, or another " + o_.names.checkpoint_or("checkpoint") + " file";
    if (c.state.step > o_.total_steps)
      return res + ": '" + path + "' holds " + std::to_string(c.state.step) + " " + o_.unit + " done, past this run's " +
             std::to_string(o_.total_steps) + " (" +
             (o_.names.epochs.empty() ? "the epochs are the run's total" : o_.names.epochs + " is the total") +
             ", not a number of extra epochs)";
    if (rng && c.state.rng.empty())
      return res + ": '" + path + "' holds no per-rank RNG states, which this program needs";
    restore_checkpoint(c, path, params, opt);
    if (rng) rng->set_state(c.state.rng[size_t(env_.rank())]);
    start_ = saved_step_ = c.state.step;
    records_ = c.state.records;
  } catch (const Error& e) {
    return res + ": cannot use checkpoint: " + user_message(e.what());
  }
  return "";
}

std::string RunFile::resume(ParamArena<float>& params, Optimizer<float>& opt, Rng* rng) {
  if (o_.path.empty()) return "";
  // Every collective here waits through the watchdog: a rank that never arrives (stopped, hung
  // on the file system) ends the job with the stall exit code, as in a step.
  std::string bytes, err;
  bool read = false;
  if (env_.root()) err = check_and_read(bytes, read);
  err = watched_bcast_string(env_, watchdog_, err, 0, "the resume's check of the checkpoint");
  if (!err.empty()) return err;
  // The file to resume from ("" for none: start from scratch), then its bytes.
  from_ = watched_bcast_string(env_, watchdog_, read ? from_ : "", 0, "the resume's check of the checkpoint");
  if (from_.empty()) {
    from_ = o_.path;
    return "";
  }
  bytes = watched_bcast_string(env_, watchdog_, std::move(bytes), 0, "the resume's broadcast of the checkpoint");
  err = agree_on_error(env_, watchdog_, restore(bytes, params, opt, rng));
  if (err.empty()) kept_ = from_;
  return err;
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
    save_checkpoint(o_.path, params, opt, st, {.keep_previous = keep_previous_});
    keep_previous_ = true;
  }
  // Every rank learns that the file is written (a stall report, from any rank, names the
  // checkpoint kept; a file system that hangs rank 0 here is a stall like any other).
  HDDP_MPI(MPI_Ibarrier(env_.comm(), &req));
  watchdog_.wait(&req, "rank 0's checkpoint write");
  saved_step_ = steps_done;
  kept_ = o_.path;
}

std::string RunFile::kept_note() const {
  if (o_.path.empty()) return " (no " + o_.names.checkpoint_or("checkpoint") + ")";
  if (kept_.empty()) return " (no checkpoint written yet)";
  return "; the last checkpoint '" + kept_ + "' (" + std::to_string(saved_step_) + " " + o_.unit + ") is kept";
}

std::string RunFile::continue_hint() const {
  return o_.names.resume.empty() ? "resume from it" : "continue with " + o_.names.resume;
}

}  // namespace hddp
