#pragma once
// The stop guard of a training loop: signals, the non-finite check, and the ranks' agreement on
// both, so that every rank stops at the same step.
//
//   - install_stop_handlers(): SIGTERM and SIGUSR1 only set a flag (after MPI_Init, so nothing
//     Open MPI installs replaces the handlers).
//   - check(), after each backward: one pass over the averaged gradients gives their sum of
//     squares (finite exactly when every gradient is: the norm clipping takes it too, so the
//     gradients are read once per step); each rank notes its first non-finite loss (and own
//     gradient, when DistributedModel::set_check_finite is on). Every `check_every` steps (and when asked: at a checkpoint, at the last step,
//     and at once when the averaged gradients - the same on every rank - are not finite) the
//     ranks agree with one MPI_Allreduce of three int64 (MIN): the signal, the earliest
//     (step, rank) that was not finite, and the next interval. The agreement happens at the same
//     steps on every rank, so all stop together: before the optimizer step on NaN/Inf (exit 3),
//     after it on a signal (checkpoint, exit 75).
//
//   StopGuard guard(env, watchdog, {.program = "my_train", .total_steps = n}, start, kept);
//   for (step = start; step < n; ++step) {
//     ... forward, loss, ddp.backward(...)
//     const StopGuard::Verdict v = guard.check(step, loss, ddp, checkpoint_due);
//     if (v.non_finite) return finish_together(env, watchdog, Exit::NonFinite);
//     clip_grad_norm(n, grads, max_norm, std::sqrt(v.grad_sq));  // if clipping
//     opt.step(...);
//     if (v.signal) { checkpoint; return finish_together(env, watchdog, Exit::Stopped); }
// TrainingRun (train/training_run.h) does all of this in end_step().
//   }
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>

namespace hddp {

// SIGTERM and SIGUSR1 set the stop flag.
void install_stop_handlers();
// The signal that asked to stop (SIGTERM or SIGUSR1), 0 for none yet.
int stop_signal();
const char* signal_name(int sig);  // "SIGTERM", "SIGUSR1"

struct StopGuardOptions {
  std::string program = "train";  // "<program>: error: ..." in rank 0's messages
  int64_t total_steps = 0;        // the last step always agrees
  int64_t check_every = 0;        // steps between agreements; 0: about every 5 ms of training
  // How messages name step s (0-based): "epoch 12" (default: "step s + 1").
  std::function<std::string(int64_t step)> where{};
};

class StopGuard {
 public:
  // start: the first step of this run (a resume's); kept: what the stop messages say about the
  // checkpoint kept (RunFile::kept_note).
  StopGuard(const mpi::Env& env, Watchdog& watchdog, StopGuardOptions options, int64_t start,
            std::function<std::string()> kept);

  struct Verdict {
    int signal = 0;           // the agreed stop signal, 0 for none
    bool non_finite = false;  // a loss or gradient was not finite: stop before the optimizer step
    double grad_sq = 0;       // the sum of squares of the averaged gradients (their one pass)
  };
  // After backward of `step`: notes this rank's first non-finite value, and agrees with the
  // other ranks when it is time (always when `agree_now`). On non-finite values every rank
  // prints what it found and rank 0 the verdict.
  Verdict check(int64_t step, double loss, DistributedModel& ddp, bool agree_now);

  std::string where(int64_t step) const;

 private:
  void note_local(int64_t step, double loss, DistributedModel& ddp);
  int64_t next_interval(int64_t step) const;
  void report_non_finite(int64_t step, int64_t first_bad) const;

  const mpi::Env& env_;
  Watchdog& watchdog_;
  StopGuardOptions o_;
  std::function<std::string()> kept_;
  int64_t local_bad_;        // earliest step * size + rank with a non-finite loss or own gradient
  std::string local_reason_;
  // The agreement: first at the first step (a signal may have come during start-up), then at
  // the agreed interval.
  int64_t next_check_, last_check_;
  std::chrono::steady_clock::time_point t_check_;
};

}  // namespace hddp
