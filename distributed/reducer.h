#pragma once
// Data-parallel gradient reducer (PyTorch DDP's Reducer, in small): one MPI rank per node,
// gradients grouped in buckets (distributed/buckets.h), one MPI_Iallreduce per bucket started
// as soon as backward has finished every gradient in it, so communication overlaps the
// backward pass of the earlier layers.
//
// Use, per step (DistributedModel, distributed/ddp.h, does this for a Sequential):
//   reducer.begin_step();                 // before backward
//   model.backward(...)  -> hook calls reducer.grads_ready_from(offset) after each layer
//   reducer.finish();                     // waits, averages: grads are identical on all ranks
// The replicas must start equal: replicate() (distributed/ddp.h) checks the layout on every
// rank and broadcasts rank 0's parameters.
//
// Modes (ReduceMode): Open MPI's nonblocking collectives advance only inside MPI calls
// (Debian's Open MPI 4.1 has no asynchronous progress for them), so each overlapped
// mode is a progress engine (reducer_engines.h, one class per mode) that makes those calls:
//   Blocking - no overlap: finish() runs one blocking MPI_Allreduce per bucket, in order.
//   Test     - MPI_Test from the compute thread: between layers, and from inside long GEMMs
//              through the kernels' progress hook (kernels/progress.h), at most once per poll
//              interval. Needs MPI_THREAD_FUNNELED.
//   Thread   - a helper thread that polls MPI_Test every poll interval while buckets are in
//              flight, and sleeps otherwise. Every MPI call of the reducer is made under one
//              mutex, so MPI_THREAD_SERIALIZED suffices.
//   Default: Test. It gave the shortest 2-rank training step in most configurations measured
//   and takes no core; the thread helps only with a core of its own (progress_cpu), which the
//   2-core machines measured could not give it.
// Buckets and progress on a link (measured with 2 ranks, each in a network namespace of its own
// on one core, joined by a veth link shaped to 1-25 Gbit/s each way, 3 interleaved rounds; the
// project's benchmark results, "Over a network link"): over TCP a transfer moves only while
// some MPI call runs on the rank, so
//   - every long kernel calls the progress hook (the GEMM and the direct convolution); before
//     the convolution did, a bucket launched before its backward sat still until finish();
//   - the cap is 1 MiB, not PyTorch's 25 MiB: with 25 MiB the CNN's large Linear shared a
//     bucket with the convolutions and left at the end of backward (1 Gbit/s: 27.4 ms a step
//     against 18.8 ms; 3 Gbit/s: 18.2 against 16.1).
//   On unshaped and 10-25 Gbit/s links the modes and caps were within 5-8 % of each other (the
//   spread of the rounds): there the kernel's TCP work takes the rank's one core whether the
//   transfer overlaps backward or follows it. Test mode stays the default: Thread was never
//   faster by more than the spread, and a poll interval of 200 us instead of 50 changed nothing.
// Averaging: each bucket is summed by MPI; once every bucket is complete the gradients are
// multiplied by 1/P. The sum is the same on every rank, so parameters stay bitwise identical
// across ranks. With 2 ranks the reduction op itself averages, (a + b) * 0.5 - bitwise the same
// result, without the extra pass over the gradients, which cost 10-30 % of the allreduce on a
// 2-core machine. How a bucket travels (float, or bf16) is the reducer's Wire (reducer_wire.h).
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <hddp/core/trace.h>
#include <hddp/distributed/buckets.h>
#include <hddp/distributed/watchdog.h>

namespace hddp {

class Wire;          // how the buckets travel (reducer_wire.h, internal)
class BucketWork;    // each bucket's MPI call, as the engines see it (reducer_engines.h, internal)
class ReduceEngine;  // one per mode (reducer_engines.h, internal)

enum class ReduceMode { Blocking, Test, Thread };
inline constexpr ReduceMode kReduceModes[] = {ReduceMode::Blocking, ReduceMode::Test, ReduceMode::Thread};
const char* to_string(ReduceMode m);                // "blocking" | "test" | "thread"
ReduceMode parse_reduce_mode(const std::string& s);  // throws std::invalid_argument otherwise
bool overlaps(ReduceMode m);                         // launches buckets during backward
int required_thread_level(ReduceMode m);             // the MPI thread level the mode needs

struct ReducerOptions {
  // 1 MiB (PyTorch: 25 MiB): a large parameter gets a bucket of its own, launched as soon as
  // its layer's backward is done, instead of waiting in a bucket with the layers before it (on
  // a CNN, the first Linear's weights with every convolution's: ready only when backward
  // ends). See "Buckets and progress on a link" above.
  int64_t bucket_cap_bytes = int64_t(1) << 20;
  int64_t first_bucket_cap_bytes = int64_t(1) << 20;  // PyTorch's first bucket: 1 MiB
  ReduceMode mode = ReduceMode::Test;
  double poll_interval_us = 50;   // 10..1000 us made no consistent difference to a step
  // libnbc's algorithm for the reducer's MPI_Iallreduce calls (Open MPI's
  // coll_libnbc_iallreduce_algorithm: 0 libnbc's choice, 2 binomial, 3 rabenseifner), set
  // right before each call and restored right after; -1 leaves libnbc's choice. libnbc itself
  // takes the binomial tree for every in-place call and for fewer than 4 ranks - 1.5-3x slower
  // than MPI_Allreduce from 1 MiB up on 2 ranks, and rabenseifner as fast as MPI_Allreduce
  // (measured on 2-core AMD EPYC machines, Open MPI 4.1.4). No effect on another MPI, or when
  // the environment set the variable, which wins.
  int nbc_iallreduce_algorithm = 3;
  // Thread mode: the CPU the progress thread is pinned to; -1 leaves it where it is created,
  // i.e. on the creating thread's CPUs - with OMP_PROC_BIND set, libgomp has bound that
  // (master) thread to one place at start-up, so the progress thread shares its core.
  // spare_progress_cpu() picks the place OpenMP leaves free.
  int progress_cpu = -1;
  // Gradients on the wire as bf16 (--grad-dtype bf16): each bucket rounded to bf16 (bf16.h) as
  // it is launched, summed by a user-defined op (each add in float, rounded to bf16; Open MPI has
  // no bf16 type), converted back and divided by the rank count after the last bucket: half
  // the bytes of a float allreduce. Off for one rank (nothing travels).
  bool bf16_wire = false;
  // Waits on the buckets with a deadline (distributed/watchdog.h); must outlive the reducer.
  // Null or disabled: MPI_Wait and, in Blocking mode, MPI_Allreduce. With an enabled watchdog
  // Blocking mode runs each bucket as MPI_Iallreduce (same libnbc algorithm) waited at once.
  Watchdog* watchdog = nullptr;
};

// A CPU for the progress thread that OpenMP does not use: with OMP_PLACES set and
// OMP_PROC_BIND=close, a team of omp_get_max_threads() threads occupies the first places, so
// the first CPU of place omp_get_max_threads() is free when there are more places than
// threads (run OpenMP on c-1 of a rank's c cores). -1 when there is no such place.
int spare_progress_cpu();

// Seconds; `last` is the most recent synchronised step, `total` sums all of them.
struct ReducerTimes {
  double comm = 0;     // first bucket launched -> last bucket complete (Blocking: = exposed)
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
  // grads has n elements laid out as `layout` describes (it must cover them exactly) and must
  // outlive the reducer; so must trace. Collective only in creating the 2-rank averaging op.
  Reducer(MPI_Comm comm, float* grads, int64_t n, const std::vector<ParamSlice>& layout,
          ReducerOptions options = {}, Trace* trace = nullptr);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // While true, backward passes only accumulate gradients locally (gradient accumulation:
  // DistributedModel::set_no_sync); the next step with no_sync off reduces the accumulated sum.
  void set_no_sync(bool on) { no_sync_ = on; }
  bool no_sync() const { return no_sync_; }

  void begin_step();
  // Every gradient at arena offset >= `offset` is final: start the buckets that became ready.
  void grads_ready_from(int64_t offset);
  // Test mode: drives in-flight collectives, at most once per poll interval (the GEMM hook).
  void progress();
  // Waits for every bucket and averages. After it, grads hold the mean over ranks.
  void finish();

  const std::vector<Bucket>& buckets() const { return buckets_; }
  const ReducerStats& stats() const { return stats_; }
  ReduceMode mode() const { return opt_.mode; }
  int size() const { return size_; }

 private:
  using Clock = std::chrono::steady_clock;
  void record_times(Clock::time_point t0, Clock::time_point t1);

  int size_ = 1;
  ReducerOptions opt_;
  Trace* trace_;
  std::vector<Bucket> buckets_;
  bool no_sync_ = false;
  bool active_ = false;  // between begin_step() and finish()
  ReducerStats stats_;
  std::unique_ptr<Wire> wire_;
  std::unique_ptr<BucketWork> work_;
  std::unique_ptr<ReduceEngine> engine_;  // the mode's; last: destroyed first (joins the progress thread)
};

}  // namespace hddp
