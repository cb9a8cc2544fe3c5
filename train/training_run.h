#pragma once
// One training run over the ranks, from the first step to the exit code: the stall watchdog,
// the checkpoint and its resume (train/run_file.h), the data-parallel model
// (distributed/ddp.h) and the stop guard (train/stop_guard.h), built in their order by one
// object, and end_step(), the call that ends every step the same way in every program.
//
//   TrainingRun run(env, model, opt, {.program = "my_train", .epochs = 10, .steps_per_epoch = spe,
//                                     .checkpoint = "run.ckpt", .resume = true, .identity = id});
//   if (const std::string err = run.begin(); !err.empty()) -> rank 0 prints it, every rank exits 2
//   for (int64_t step = run.first_step(); step < run.total_steps(); ++step) {
//     ... the batch of `step`; model.zero_grad();
//     const double loss = xent.forward(model.forward(x, rows), labels, rows);
//     run.ddp().backward(xent.grad());
//     if (const std::optional<int> exit = run.end_step(step, loss, on_epoch_end)) return *exit;
//   }
//
// end_step(step, loss, on_epoch_end), after backward:
//   1. the verdict: the ranks agree (when due) on a signal and on NaN/Inf in any rank's loss or
//      in the averaged gradients, found by one pass over the gradients that also gives their
//      norm. NaN/Inf: every rank stops before the optimizer step, exit 3.
//   2. the update: the gradients clipped to `clip_grad_norm` (that same norm), the learning
//      rate from `schedule`, the optimizer step.
//   3. at the last step of an epoch, on_epoch_end(epoch) (0-based): the program's metrics,
//      evaluation, log line (collectives allowed: every rank calls it).
//   4. the checkpoint, when due: after every `checkpoint_every` epochs, after the last epoch,
//      and after any step where a signal arrived (inside an epoch too). It holds the state,
//      the program's records (`records`, rank 0's) and every rank's `rank_values` (a partial
//      sum of the epoch under way, say) gathered, so a resumed run ends bitwise where an
//      uninterrupted one ends. A state that is not finite is never saved: exit 3.
//   5. a signal (SIGTERM, SIGUSR1; install_stop_handlers()): rank 0 says where all stopped
//      and whether the checkpoint was written, every rank exits 75 together.
// It returns the exit code when the program must return it now, else nothing (the last step
// too: the program then writes its outputs and returns 0).
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/schedule.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/exit_code.h>
#include <hddp/train/line_log.h>
#include <hddp/train/run_file.h>
#include <hddp/train/stop_guard.h>

namespace hddp {

using Records = std::map<std::string, std::string>;  // a checkpoint's named records

struct TrainingRunOptions {
  std::string program = "train";  // "<program>: error: ..." in rank 0's messages
  int64_t epochs = 1;
  int64_t steps_per_epoch = 1;    // 1: a step is an epoch (messages then count epochs only)
  // The checkpoint (train/run_file.h): "" for none; resume from it when it exists; what a
  // resumed one must match; every how many epochs (0: after the last epoch and on a signal).
  std::string checkpoint;
  bool resume = false;
  std::map<std::string, std::string> identity;
  int64_t checkpoint_every = 0;
  Rng* rng = nullptr;              // a per-rank RNG whose state the checkpoint keeps (or null)
  // Called on every rank when the checkpoint of `steps_done` steps is written (collectives
  // allowed): rank 0's records (what the program needs to continue: its metrics so far), and
  // this rank's values (the same count on every rank). Both may be empty.
  std::function<Records(int64_t steps_done)> records;
  std::function<std::vector<double>()> rank_values;
  // Keep train_seconds() in the checkpoint, so a resumed run's clock goes on from there (the
  // checkpoint's bytes then differ between two runs of the same steps).
  bool keep_train_seconds = false;
  // The update: global-norm clipping (0: none; core/optim.h) and the learning rate per step
  // (null: the optimizer's own).
  double clip_grad_norm = 0;
  const LrSchedule* schedule = nullptr;
  // The ranks: the stall watchdog's timeout (seconds; 0: off), steps between agreements on
  // signals and NaN (0: about every 5 ms), the reducer (its watchdog is this run's).
  double timeout_s = 300;
  int64_t check_every = 0;
  ReducerOptions reducer;
  Trace* trace = nullptr;
};

class TrainingRun {
 public:
  // The watchdog and the run file; nothing collective yet. model and opt must outlive it.
  TrainingRun(const mpi::Env& env, Module<float>& model, Optimizer<float>& opt, TrainingRunOptions options);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  // Collective: resumes from the checkpoint when there is one (rank 0 says so), then
  // replicates the model (rank 0's weights everywhere) and builds its reducer. "" or the
  // error, the same on every rank: return 2 (Exit::Usage) everywhere, nothing trained.
  std::string begin();
  int64_t first_step() const { return start_; }  // the resumed checkpoint's steps (0: fresh)
  int64_t total_steps() const { return o_.epochs * o_.steps_per_epoch; }
  int64_t steps_per_epoch() const { return o_.steps_per_epoch; }
  // The resumed checkpoint's records (empty when fresh) and this rank's values.
  const std::map<std::string, std::string>& records() const { return run_file_.records(); }
  const std::vector<double>& rank_values() const { return rank_values_; }

  // Ends step `step` (see above). on_epoch_end may be empty.
  std::optional<int> end_step(int64_t step, double loss, const std::function<void(int64_t epoch)>& on_epoch_end = {});

  // Seconds of training so far, the resumed checkpoint's included; on_epoch_end and the
  // checkpoints are not counted.
  double train_seconds() const;
  // "epoch 3" (a step per epoch) or "epoch 3 (step 5 of 20)", for step (0-based) in messages.
  std::string where(int64_t step) const;
  // Every rank ends together with `code` (stdio and the log flushed first): for a program's
  // own stops; returns the code to return from main.
  int finish(Exit code);

  DistributedModel& ddp() { return *ddp_; }
  Watchdog& watchdog() { return watchdog_; }
  const RunFile& run_file() const { return run_file_; }
  LineLog& log() { return log_; }  // rank 0's progress lines (never block a step)
  const mpi::Env& env() const { return env_; }

 private:
  bool save(int64_t done);  // false: the state is not finite (reported), nothing written
  const mpi::Env& env_;
  Module<float>& model_;
  Optimizer<float>& opt_;
  TrainingRunOptions o_;
  Watchdog watchdog_;
  RunFile run_file_;
  LineLog log_;
  std::unique_ptr<DistributedModel> ddp_;
  std::unique_ptr<StopGuard> guard_;
  int64_t start_ = 0;
  std::vector<double> rank_values_;
  double train_s_ = 0;                       // the resumed checkpoint's
  double paused_s_ = 0;                      // in on_epoch_end and checkpoints since begin()
  std::optional<std::chrono::steady_clock::time_point> paused_;  // in one now, since
  std::chrono::steady_clock::time_point t0_;  // begin()
};

}  // namespace hddp
