#pragma once
// The run file: a training run's checkpoint and its resume, collective over the ranks (format:
// core/checkpoint.h; written atomically by rank 0).
//
//   RunFile run(env, watchdog, {.path = "run.ckpt", .resume = true, .identity = id, .total_steps = n});
//   if (std::string err = run.resume(model.arena(), opt, &rng); !err.empty()) -> exit 2 on every rank
//   for (step = run.start(); ...) { ...; if (due) run.save(step + 1, model.arena(), opt, &rng, records); }
//
// resume() is one explicit operation: rank 0 checks the path (its directory writable; an
// existing file needs resume = true), removes the temporaries a killed save left
// (PATH.tmp.<pid>) and reads the file; every rank receives the same bytes and restores from
// them the parameters, the optimizer state and, when given, its own RNG state. A checkpoint of
// another run (identity or rank count) or one past total_steps is refused naming what differs.
// Without a file it starts from scratch (start() == 0), so a job script can always pass
// --resume. save() gathers every rank's RNG state and writes parameters, optimizer state and
// rank 0's records; every rank learns that the file is written. Non-finite state is never
// saved (finite()).
//
// Files (core/checkpoint.h): PATH the newest checkpoint, PATH.prev the one before it (every
// save keeps it), PATH.tmp.<pid> a save under way. When PATH is missing, truncated or fails
// its checksum (a crash during a save, a damaged disk), resume() uses PATH.prev, and rank 0
// warns naming both files ("checkpoint: warning: 'run.ckpt': checksum mismatch ...;
// resuming from the previous checkpoint 'run.ckpt.prev'"); the next save then replaces the
// damaged PATH and keeps PATH.prev. Both unusable: an error naming both. Whether a file fits
// this run (identity, model) is not a reason to fall back: another run's file is refused.
//
// Every collective of resume() (and of load_weights_everywhere(), train/all_ranks.h) waits through the watchdog,
// like a step's: a rank that never arrives ends the job with the stall exit code.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/arena.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/exit_code.h>

namespace hddp {

// How messages name the program's own options, where it has them ("--checkpoint", "--resume",
// "--epochs"): "pass --resume to continue from it". Left empty, messages say it in plain words
// any program can use ("resume from it").
struct OptionNames {
  std::string checkpoint{}, resume{}, epochs{};
  std::string checkpoint_or(const char* words) const { return checkpoint.empty() ? words : checkpoint; }
  std::string resume_or(const char* words) const { return resume.empty() ? words : resume; }
};

struct RunFileOptions {
  std::string path{};                            // "" : no checkpoint (resume and save do nothing)
  bool resume = false;                           // continue from path when it exists
  std::map<std::string, std::string> identity{}; // what a resumed checkpoint must match
  int64_t total_steps = 0;                       // a checkpoint further on is refused
  OptionNames names{};                           // how messages name the program's options
  std::string unit = "steps";                    // what a step is called in messages ("epochs")
};

class RunFile {
 public:
  // Also tells the watchdog what a stall report says about the checkpoint kept (kept_note(),
  // and how to continue from it when there is one), until it is destroyed.
  RunFile(const mpi::Env& env, Watchdog& watchdog, RunFileOptions options);
  ~RunFile();
  RunFile(const RunFile&) = delete;  // the watchdog's note holds `this`
  RunFile& operator=(const RunFile&) = delete;

  // Collective. "" or the error, the same on every rank; nothing changed or written then.
  std::string resume(ParamArena<float>& params, Optimizer<float>& opt, Rng* rng = nullptr);
  int64_t start() const { return start_; }  // steps done in the resumed checkpoint (0: fresh)
  // The file resume() read: path(), or path() + ".prev" after a fallback (every rank).
  const std::string& resumed_from() const { return from_; }
  // The resumed checkpoint's records (empty when fresh); the same on every rank.
  const std::map<std::string, std::string>& records() const { return records_; }

  // Collective: writes the checkpoint of `steps_done` steps (rank 0's params, opt and records;
  // every rank's rng state when given - all ranks pass one or none).
  void save(int64_t steps_done, const ParamArena<float>& params, Optimizer<float>& opt, const Rng* rng,
            const std::map<std::string, std::string>& records);
  // Parameters and optimizer state are finite (the same on every rank: no collective).
  static bool finite(const ParamArena<float>& params, Optimizer<float>& opt);

  bool enabled() const { return !o_.path.empty(); }
  const std::string& path() const { return o_.path; }
  int64_t saved_step() const { return saved_step_; }
  // What stop messages say about the checkpoint: "; the last checkpoint 'F' (N steps) is kept",
  // " (no checkpoint)" or " (no checkpoint written yet)".
  std::string kept_note() const;
  // How to continue from a kept checkpoint: "continue with --resume" / "resume from it".
  std::string continue_hint() const;

 private:
  std::string check_and_read(std::string& bytes, bool& read);  // rank 0
  std::string restore(const std::string& bytes, ParamArena<float>& params, Optimizer<float>& opt, Rng* rng);

  const mpi::Env& env_;
  Watchdog& watchdog_;
  RunFileOptions o_;
  int64_t start_ = 0, saved_step_ = 0;
  std::map<std::string, std::string> records_;
  std::string from_;                // the file resumed from: path, or path.prev after a fallback
  std::string kept_;                // the checkpoint on disk now ("" : none written or resumed)
  bool keep_previous_ = true;       // rank 0: the next save keeps PATH as PATH.prev
};

}  // namespace hddp
