#pragma once
// One training run over the ranks, from the first step to the exit code: the stall watchdog,
// the checkpoint and its resume (train/run_file.h), the data-parallel model
// (distributed/ddp.h), the stop guard (train/stop_guard.h) and the epoch's bookkeeping (its
// mean training loss, the metrics table), built in their order by one object, and end_step(),
// the call that ends every step the same way in every program.
//
//   TrainingRun run(env, model, opt, {.program = "my_train", .epochs = 10, .steps_per_epoch = spe,
//                                     .checkpoint = "run.ckpt", .resume = true,
//                                     .metrics = {"epoch", "train_loss", "test_accuracy"}});
//   if (const std::string err = run.begin(); !err.empty()) -> rank 0 prints it, every rank exits 2
//   for (int64_t step = run.first_step(); step < run.total_steps(); ++step) {
//     ... the batch of `step` (rows of it on this rank); model.zero_grad();
//     const double loss = xent.forward(model.forward(x, rows), labels, rows);
//     run.ddp().backward(xent.grad());
//     if (const std::optional<int> exit = run.end_step(step, loss, rows, on_epoch_end)) return *exit;
//   }
//   on_epoch_end = [&](const EpochEnd& e) { run.metrics().add({e.epoch + 1.0, e.train_loss, accuracy}); };
//
// end_step(step, loss, rows, on_epoch_end), after backward (every call in this order: the
// constructor, begin(), then the steps; anything else out of order throws hddp::Error):
//   1. the verdict: the ranks agree (when due) on a signal and on NaN/Inf in any rank's loss or
//      in the averaged gradients, found by one pass over the gradients that also gives their
//      norm. NaN/Inf: every rank stops before the optimizer step, exit 3.
//   2. the update: the gradients clipped to `clip_grad_norm` (that same norm), the learning
//      rate from `schedule`, the optimizer step.
//   3. at the last step of an epoch, on_epoch_end(EpochEnd) on every rank (collectives
//      allowed): the epoch and its training loss, the mean over every sample of the epoch on
//      every rank (each step's loss, itself its batch's mean, weighted by its rows: what one
//      step over the epoch's whole data would report). The program's evaluation, its row of
//      run.metrics(), its log line.
//   4. the checkpoint, when due: after every `checkpoint_every` epochs, after the last epoch,
//      and after any step where a signal arrived (inside an epoch too). It holds the model,
//      the optimizer, the RNG, each rank's loss sums of the epoch under way, the metrics table
//      and the program's `state`, so a resumed run ends bitwise where an uninterrupted one
//      ends. A state that is not finite is never saved: exit 3.
//   5. a signal (SIGTERM, SIGUSR1; install_stop_handlers()): rank 0 says where all stopped
//      and whether the checkpoint was written, every rank exits 75 together.
// It returns the exit code when the program must return it now, else nothing (the last step
// too: the program then writes its outputs and returns 0).
//
// A resumed checkpoint must come from the same run: its identity is the program's `identity`
// plus, always, the optimizer's settings and the learning-rate schedule (so a cosine schedule
// over another number of epochs is refused, while a constant rate may go on for more epochs).
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
#include <hddp/train/metrics_table.h>
#include <hddp/train/run_file.h>
#include <hddp/train/stop_guard.h>

namespace hddp {

// What the epoch-end callback gets, on every rank.
struct EpochEnd {
  int64_t epoch = 0;       // 0-based (messages say epoch + 1)
  double train_loss = 0;   // the mean over the epoch's samples on every rank (NaN: epoch_loss off)
  int64_t samples = 0;     // the rows it covered, over every rank
};

// State of the program's own that a checkpoint must keep besides the model, the optimizer, the
// RNG, the epoch's loss sums and the metrics table (say, every rank's loss history). save() is
// collective (every rank calls it, its collectives wait through `watchdog`; rank 0's bytes are
// kept); restore() gets those bytes on every rank when a run resumes and throws hddp::Error
// saying what is wrong with bytes it cannot use (the kit names the checkpoint).
class RunState {
 public:
  virtual ~RunState() = default;
  virtual std::string save(int64_t steps_done, Watchdog& watchdog) = 0;
  virtual void restore(const std::string& bytes, int64_t steps_done) = 0;
};

struct TrainingRunOptions {
  std::string program = "train";  // "<program>: ..." in rank 0's messages
  OptionNames names{};            // the program's own option names for messages (run_file.h)
  int64_t epochs = 1;
  int64_t steps_per_epoch = 1;    // 1: a step is an epoch (messages then count epochs only)
  // The checkpoint (train/run_file.h): "" for none; resume from it when it exists; what a
  // resumed one must match besides the optimizer and schedule (model, data, seed...); every how
  // many epochs (0: after the last epoch and on a signal).
  std::string checkpoint{};
  bool resume = false;
  std::map<std::string, std::string> identity{};
  int64_t checkpoint_every = 0;
  Rng* rng = nullptr;              // a per-rank RNG whose state the checkpoint keeps (or null)
  RunState* state = nullptr;       // the program's own state to keep (or null)
  // The columns of run.metrics(), one row per epoch added by the program (empty: no table).
  std::vector<std::string> metrics{};
  // Reduce the epoch's mean training loss over the ranks at each epoch's end (one allreduce of
  // two numbers); false for a program that reports each rank's own loss (EpochEnd's is NaN).
  bool epoch_loss = true;
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
  ReducerOptions reducer{};
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
  // The run's metrics, one row per epoch done (the resumed checkpoint's rows included); throws
  // hddp::Error when the options name no columns.
  MetricsTable& metrics();

  // Ends step `step` (see above): `loss` is this rank's mean over its `rows` samples of the
  // step. on_epoch_end may be empty.
  std::optional<int> end_step(int64_t step, double loss, int64_t rows,
                              const std::function<void(const EpochEnd&)>& on_epoch_end = {});

  // Seconds of training so far, the resumed checkpoint's included; on_epoch_end and the
  // checkpoints are not counted.
  double train_seconds() const;
  // "epoch 3" (a step per epoch) or "epoch 3 (step 5 of 20)", for step (0-based) in messages.
  std::string where(int64_t step) const;
  // Every rank ends together with `code` (stdio and the log flushed first): for a program's
  // own stops; returns the code to return from main.
  int finish(Exit code);

  DistributedModel& ddp();  // after begin(), else hddp::Error
  Watchdog& watchdog() { return watchdog_; }
  const RunFile& run_file() const { return run_file_; }
  LineLog& log() { return log_; }  // rank 0's progress lines (never block a step)
  const mpi::Env& env() const { return env_; }

 private:
  bool save(int64_t done);  // false: the state is not finite (reported), nothing written
  std::string restore_records();  // begin(): the kit's records of a resumed checkpoint
  EpochEnd reduce_epoch(int64_t epoch);
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
  double loss_rows_ = 0, rows_ = 0;          // this rank's, over the epoch under way
  std::optional<MetricsTable> metrics_;
  double train_s_ = 0;                       // the resumed checkpoint's
  double paused_s_ = 0;                      // in on_epoch_end and checkpoints since begin()
  std::optional<std::chrono::steady_clock::time_point> paused_;  // in one now, since
  std::chrono::steady_clock::time_point t0_;  // begin()
};

}  // namespace hddp
