#pragma once
// The guard of a run: signals, the non-finite check and the ranks' agreement on both.
//
//   - SIGTERM/SIGUSR1 only set a flag (install_stop_handlers).
//   - Every epoch each rank notes its first non-finite loss or own gradient (the data-parallel
//     model checks each layer's local gradients before its bucket is launched,
//     DistributedModel::set_check_finite).
//   - Every --check-every epochs (and at every checkpoint, at the last epoch, and at once when
//     the averaged gradients - the same on every rank - are not finite) the ranks agree with one
//     MPI_Allreduce of three int64 (MIN): the signal, the earliest (epoch, rank) that was not
//     finite, and the next interval. The agreement happens at the same epochs on every rank, so
//     all stop together.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include "poly_train/options.h"

namespace poly {

// SIGTERM and SIGUSR1 set the stop flag. Call after MPI_Init, so nothing Open MPI installs can
// replace the handlers.
void install_stop_handlers();
const char* signal_name(int sig);

class Guard {
 public:
  // `kept`: what the stop messages say about the checkpoint kept (RunState::kept_note).
  Guard(const hddp::mpi::Env& env, const Options& o, hddp::Watchdog& watchdog, int64_t start,
        std::function<std::string()> kept);

  struct Verdict {
    int signal = 0;           // the agreed stop signal, 0 for none
    bool non_finite = false;  // a loss or gradient was not finite: stop before the optimizer step
  };
  // After backward of `epoch`: notes this rank's first non-finite value, and agrees with the
  // other ranks when it is time (always when `checkpoint_now`). On non-finite values every rank
  // prints what it found and rank 0 the verdict.
  Verdict check(int64_t epoch, float loss, hddp::DistributedModel& ddp, bool checkpoint_now);

 private:
  void note_local(int64_t epoch, float loss, hddp::DistributedModel& ddp);
  int64_t next_interval(int64_t epoch) const;
  void report_non_finite(int64_t epoch, int64_t first_bad) const;

  const hddp::mpi::Env& env_;
  const Options& o_;
  hddp::Watchdog& watchdog_;
  std::function<std::string()> kept_;
  int64_t local_bad_;        // earliest epoch * size + rank with a non-finite loss or own gradient
  std::string local_reason_;
  // The agreement: first at the first epoch (a signal may have come during start-up), then at
  // the agreed interval.
  int64_t next_check_, last_check_;
  std::chrono::steady_clock::time_point t_check_;
};

}  // namespace poly
