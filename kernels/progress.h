#pragma once
// A hook that long-running kernels call now and then, so that a caller can make progress on
// something else meanwhile - the data-parallel reducer drives its nonblocking MPI_Iallreduce
// with it (Open MPI advances nonblocking collectives only inside MPI calls). Kernels stay free
// of MPI: they only call a function pointer.
//
// The blocked GEMM calls the hook from OpenMP thread 0 of its region (the calling thread when
// it runs serially) after every NR-wide micro-panel column of an MC x KC block, i.e. every few
// microseconds of work; the hook itself decides whether enough time has passed to act.
namespace hddp {

using ProgressHook = void (*)(void* context);

// Installs (or, with nullptr, removes) the process-wide hook. Not thread-safe against
// concurrent kernels: set it between kernel calls.
void set_progress_hook(ProgressHook hook, void* context);

// Called by kernels: runs the hook if one is installed.
void progress_poll();

}  // namespace hddp
