#pragma once
// The exit codes of a training program built on the run kit: one contract for every program,
// so a job script tells a stall from a crash and requeues only what can continue.
//   0  Ok         done
//   1  Error      runtime error: the failing rank prints its message, MPI_Abort ends every rank
//   2  Usage      bad command line, data or checkpoint: every rank exits before any training
//   3  NonFinite  NaN/Inf in a loss or the gradients: all ranks stopped before the optimizer step
//   4  Stall      a collective waited longer than the watchdog's timeout: the ranks that did not
//                 arrive are named, MPI_Abort ends the job (distributed/watchdog.h)
//   75 Stopped    SIGTERM/SIGUSR1: every rank finished its step, the checkpoint is written;
//                 continue with --resume (EX_TEMPFAIL: Slurm job files requeue on it)
#include <string>

namespace hddp {

enum class Exit : int { Ok = 0, Error = 1, Usage = 2, NonFinite = 3, Stall = 4, Stopped = 75 };

constexpr int code(Exit e) { return static_cast<int>(e); }

// The table above as lines for a program's --help.
inline std::string exit_codes_help() {
  return "Exit codes: 0 done; 1 runtime error (the failing rank's message, then MPI_Abort ends all\n"
         "ranks); 2 bad command line, data or checkpoint (nothing trained, nothing written);\n"
         "3 NaN/Inf in the loss or gradients; 4 stall (--timeout: a rank did not arrive); 75 stopped\n"
         "by SIGTERM/SIGUSR1 after writing the checkpoint (EX_TEMPFAIL: resume later;\n"
         "slurm job files requeue themselves).";
}

}  // namespace hddp
