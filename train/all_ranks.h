#pragma once
// What every rank does together outside the step: agree on a verdict each reached alone
// (reading a file), load weights every rank gets from rank 0, end together with one exit code.
// Each is collective; the forms that take the watchdog wait through it, so a rank that never
// arrives ends the job with the stall exit code instead of hanging it.
#include <string>

#include <hddp/core/arena.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/exit_code.h>

namespace hddp {

// --init FILE (collective, every wait through the watchdog): rank 0 reads safetensors weights,
// every rank parses the same bytes and loads them into params (core/safetensors.h). "" or the
// error, the same on every rank; params are unchanged then.
std::string load_weights_everywhere(const mpi::Env& env, Watchdog& watchdog, const std::string& path,
                                    ParamArena<float>& params, const std::string& flag = "--init");

// A verdict every rank reached on its own (each read a file, say), collective: "" when all
// succeeded, else the first failing rank's message, prefixed with its rank when it is not 0.
// The first form before the watchdog exists (reading the data); the second waits through it.
std::string agree_on_error(const mpi::Env& env, const std::string& err);
std::string agree_on_error(const mpi::Env& env, Watchdog& watchdog, const std::string& err);

// A string from `root` to every rank (its length first), every wait through the watchdog;
// `what` names the collective in a stall report.
std::string watched_bcast_string(const mpi::Env& env, Watchdog& watchdog, std::string s, int root, const char* what);

// Ends a run on every rank together (collective): stdio flushed, then a barrier through the
// watchdog, so every rank has printed and rank 0 has written before any rank exits (mpiexec
// tears the job down at the first non-zero exit). Returns code(code), for main to return.
int finish_together(const mpi::Env& env, Watchdog& watchdog, Exit code);

}  // namespace hddp
