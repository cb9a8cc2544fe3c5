#pragma once
// Data-parallel gradient reducer (PyTorch DDP's Reducer, in small): one MPI rank per node,
// gradients grouped in buckets (distributed/buckets.h), one MPI_Iallreduce per bucket started as soon
// as backward has finished every gradient in it, so communication overlaps the backward pass
// of the earlier layers.
//
// Use, per step:
//   reducer.begin_step();                 // before backward
//   model.backward(...)  -> hook calls reducer.grads_ready_from(offset) after each layer
//   reducer.finish();                     // waits, averages: grads are identical on all ranks
//
// Progress: Open MPI's nonblocking collectives advance only inside MPI calls (Debian's Open MPI
// has no asynchronous progress; see bench/RESULTS.md). Two strategies:
//   Progress::Test   - MPI_Testall from the compute thread: between layers, and from inside long
//                      GEMMs through the kernels' progress hook (kernels/progress.h), at most
//                      once per poll interval. Needs MPI_THREAD_FUNNELED.
//   Progress::Thread - a helper thread that polls MPI_Testall every poll interval while
//                      buckets are in flight, and sleeps otherwise. Every MPI call of the
//                      reducer is made under one mutex, so MPI_THREAD_SERIALIZED suffices.
//   Default: Test. It gave the shortest 2-rank training step in most configurations measured
//   and takes no core; the thread helps only with a core of its own (progress_cpu), which the
//   2-core machine here could not give it (bench/RESULTS.md, "Allreduce and overlap").
// Averaging: each bucket is summed by MPI, then multiplied by 1/P once complete. The sum is
// the same on every rank, so parameters stay bitwise identical across ranks. With 2 ranks the
// reduction op itself averages, (a + b) * 0.5 - bitwise the same result, without the extra
// pass over the gradients, which cost 10-30 % of the allreduce here (bench/RESULTS.md).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "core/trace.h"
#include "distributed/buckets.h"
#include "distributed/watchdog.h"

namespace hddp {

enum class Progress { Test, Thread };
const char* to_string(Progress p);
Progress parse_progress(const std::string& s);  // "test" | "thread"; throws otherwise

struct ReducerOptions {
  int64_t bucket_cap_bytes = int64_t(25) << 20;      // PyTorch's bucket_cap_mb = 25
  int64_t first_bucket_cap_bytes = int64_t(1) << 20;  // PyTorch's first bucket: 1 MiB
  bool overlap = true;            // false: one blocking MPI_Allreduce per bucket in finish()
  Progress progress = Progress::Test;
  double poll_interval_us = 50;   // shared/notes: 10..1000 us made no consistent difference
  // Open MPI's coll/libnbc algorithm for the reducer's MPI_Iallreduce calls, written to the MCA
  // variable coll_libnbc_iallreduce_algorithm through MPI_T right before each call and reset to
  // 0 (libnbc's own choice) right after: 1 ring, 2 binomial, 3 rabenseifner (reduce-scatter +
  // allgather), 4 recursive doubling; -1 leaves libnbc's choice. libnbc itself takes the
  // binomial tree for every in-place call and for fewer than 4 ranks: rank 0 receives and sums
  // everything, then sends the result back, while the other ranks wait - 1.5-3x slower than
  // MPI_Allreduce from 1 MiB up on 2 ranks here, and rabenseifner as fast as MPI_Allreduce
  // (bench/RESULTS.md, "Allreduce and overlap"). No effect on another MPI, or when the variable
  // was already set (OMPI_MCA_coll_libnbc_iallreduce_algorithm or mpiexec --mca), which wins.
  int nbc_iallreduce_algorithm = 3;
  // Progress::Thread: the CPU the progress thread is pinned to; -1 leaves it where it is
  // created, i.e. on the creating thread's CPUs - with OMP_PROC_BIND set, libgomp has bound
  // that (master) thread to one place at start-up, so the progress thread shares its core.
  // spare_progress_cpu() picks the place OpenMP leaves free.
  int progress_cpu = -1;
  // Waits on the buckets with a deadline (distributed/watchdog.h); must outlive the reducer. Null or
  // disabled: MPI_Wait and, without overlap, MPI_Allreduce. With an enabled watchdog the
  // blocking mode runs each bucket as MPI_Iallreduce (same libnbc algorithm) waited at once.
  Watchdog* watchdog = nullptr;
};

// A CPU for the progress thread that OpenMP does not use: with OMP_PLACES set and
// OMP_PROC_BIND=close, a team of omp_get_max_threads() threads occupies the first places, so
// the first CPU of place omp_get_max_threads() is free when there are more places than
// threads (run OpenMP on c-1 of a rank's c cores). -1 when there is no such place.
int spare_progress_cpu();

// Seconds; `last` is the most recent synchronised step, `total` sums all of them.
struct ReducerTimes {
  double comm = 0;     // first bucket launched -> last bucket complete (blocking: = exposed)
  double exposed = 0;  // compute thread blocked by communication: waiting in finish(), plus
                       // time inside the MPI calls made during backward (launch, MPI_Test)
  double overlap() const { return comm > 0 ? 1.0 - exposed / comm : 0.0; }
};
struct ReducerStats {
  ReducerTimes last, total;
  int64_t steps = 0;          // synchronised steps
  int64_t bytes_per_step = 0;
};

class Reducer {
 public:
  // Checks that every rank has the same parameter layout (a mismatch throws the same message
  // on every rank), then broadcasts params from rank 0. params and grads have n elements laid
  // out as `layout` describes; both must outlive the reducer.
  Reducer(MPI_Comm comm, float* params, float* grads, int64_t n, std::vector<ParamSlice> layout,
          ReducerOptions options = {}, Trace* trace = nullptr);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // MPI thread level the chosen progress strategy needs.
  static int required_thread_level(Progress p);

  // While true, backward passes only accumulate gradients locally (gradient accumulation);
  // the next step with no_sync off reduces the accumulated sum.
  void set_no_sync(bool on) { no_sync_ = on; }
  bool no_sync() const { return no_sync_; }

  void begin_step();
  // Every gradient at arena offset >= `offset` is final: start the buckets that became ready.
  void grads_ready_from(int64_t offset);
  // Drives in-flight collectives (Progress::Test); rate-limited to the poll interval.
  void progress();
  // Waits for every bucket and averages. After it, grads hold the mean over ranks.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const ReducerStats& stats() const { return stats_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  using Clock = std::chrono::steady_clock;
  void launch(size_t b);       // caller holds mu_
  void test_in_flight();       // caller holds mu_
  void complete(size_t b);     // caller holds mu_
  void wait(size_t b);         // caller holds mu_; through the watchdog when there is one
  bool watched() const { return opt_.watchdog && opt_.watchdog->enabled(); }
  void progress_thread_main();
  void init_nbc_algorithm();
  static void gemm_hook(void* self);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  float* grads_;
  int64_t n_;
  ReducerOptions opt_;
  Trace* trace_;
  std::vector<Bucket> buckets_;
  std::vector<MPI_Request> requests_;
  std::vector<char> done_;
  std::vector<Clock::time_point> launched_at_;
  size_t next_ = 0;       // next bucket to launch
  size_t completed_ = 0;  // buckets complete this step
  bool no_sync_ = false, in_step_ = false;
  Clock::time_point first_launch_, last_complete_, last_poll_;
  double blocked_s_ = 0;  // this step's time inside reducer MPI calls during backward
  ReducerStats stats_;

  std::mutex mu_;  // guards all of the above during a step in Thread mode, and every MPI call
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  std::thread::id owner_;  // the thread that drives MPI in Test mode
  // ReducerOptions::nbc_iallreduce_algorithm: the MPI_T handle of libnbc's variable, when the
  // reducer sets it; MPI_T initialised by this reducer.
  MPI_T_cvar_handle nbc_algorithm_ = MPI_T_CVAR_HANDLE_NULL;
  bool mpi_t_ = false;
  MPI_Op op_ = MPI_SUM;  // 2 ranks: an op that averages (see "Averaging" above)
};

}  // namespace hddp
