#pragma once
// The reducer's engines (internal, not installed), one small class per ReduceMode (reducer.h):
// when each bucket's collective starts and who drives it to completion. An engine sees the
// reducer only through BucketWork: the buckets, the MPI call that reduces one (through the
// Wire, reducer_wire.h), the wait with the watchdog's deadline, the report that one is done.
//   BlockingEngine  nothing during backward; finish() reduces every bucket in order
//   TestEngine      MPI_Iallreduce launched during backward, MPI_Test from the compute thread
//   ThreadEngine    the same, MPI_Test from a helper thread
#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <hddp/core/trace.h>
#include <hddp/distributed/buckets.h>
#include <hddp/distributed/reducer_wire.h>
#include <hddp/distributed/watchdog.h>

namespace hddp {

class NbcAlgorithm;

// One step's buckets as an engine sees them, numbered in launch order (bucket 0 covers the end
// of the arena: its gradients are ready first). Makes each bucket's MPI call and keeps the
// step's times. Not locked: an engine with a thread of its own calls it under its mutex.
class BucketWork {
 public:
  using Clock = std::chrono::steady_clock;
  struct Times {
    Clock::time_point first_start, last_done;  // bucket 0 started, the last bucket done
    double blocked_s = 0;  // the compute thread inside reducer MPI calls during backward
  };

  // buckets, wire, watchdog and trace must outlive it. watchdog: null, or an enabled one that
  // every wait goes through. nbc_algorithm: libnbc's MPI_Iallreduce algorithm set around each
  // start (nbc_algorithm.h), -1 to leave libnbc's choice.
  BucketWork(MPI_Comm comm, const std::vector<Bucket>& buckets, Wire& wire, Watchdog* watchdog, int nbc_algorithm,
             Trace* trace);
  ~BucketWork();
  BucketWork(const BucketWork&) = delete;
  BucketWork& operator=(const BucketWork&) = delete;

  size_t count() const { return buckets_.size(); }
  // Bucket b is ready once every gradient from arena offset `from` on is final.
  bool ready(size_t b, int64_t from) const { return buckets_[b].begin >= from; }
  // Packs bucket b (the wire) and starts its MPI_Iallreduce, in place, into *req.
  void start(size_t b, MPI_Request* req);
  // Bucket b as one blocking MPI_Allreduce, in place.
  void allreduce(size_t b);
  // Waits for a started bucket: the watchdog's wait with its deadline, else MPI_Wait.
  void wait(size_t b, MPI_Request* req);
  Clock::time_point started(size_t b) const { return started_[b]; }  // this step's start or allreduce
  // Bucket b is reduced: the step's last completion, the trace.
  void done(size_t b);
  // Time the compute thread spent in reducer MPI calls during backward.
  void blocked(double s) { times_.blocked_s += s; }

  void begin_step() { times_ = Times{}; }
  const Times& times() const { return times_; }

 private:
  int elements(size_t b) const;  // bucket b's count, as MPI takes it

  MPI_Comm comm_;
  const std::vector<Bucket>& buckets_;
  Wire& wire_;
  Watchdog* watchdog_;
  int nbc_algorithm_;
  std::unique_ptr<NbcAlgorithm> nbc_;  // when libnbc's algorithm is ours to set
  Trace* trace_;
  std::vector<Clock::time_point> started_;  // per bucket, this step
  Times times_;
};

class ReduceEngine {
 public:
  virtual ~ReduceEngine() = default;
  virtual void begin_step() {}  // a step that reduces begins (no_sync steps never reach the engine)
  // Every gradient from arena offset `from` on is final: start the buckets that became ready.
  virtual void grads_ready_from(int64_t /*from*/) {}
  virtual void poll() {}  // the kernels' progress hook, from inside long GEMMs
  // Returns with every bucket reduced (not yet unpacked: the wire does that); ready for the next step.
  virtual void finish() = 0;
};

// Blocking: nothing during backward; finish() reduces each bucket in order, waited at once: one
// MPI_Allreduce, or (`nonblocking`) MPI_Iallreduce and a wait - a watchdog waits on a request
// with its deadline, and the bf16 wire's buckets go as in the overlapped modes.
class BlockingEngine final : public ReduceEngine {
 public:
  BlockingEngine(BucketWork& work, bool nonblocking) : work_(work), nonblocking_(nonblocking) {}
  void finish() override;

 private:
  BucketWork& work_;
  bool nonblocking_;
};

// The overlapped engines' buckets in this step: started [0, next), complete [0, completed). They
// complete in order: test() stops at the first incomplete one (a later bucket cannot overtake an
// earlier one in libnbc's schedule) and finish() waits for them in order.
class InFlight {
 public:
  using Clock = BucketWork::Clock;
  explicit InFlight(BucketWork& work) : work_(work), requests_(work.count(), MPI_REQUEST_NULL) {}
  bool idle() const { return completed_ == next_; }
  // Starts the buckets that became ready (BucketWork::ready).
  void start_ready(int64_t from);
  // MPI_Test on the buckets in flight, in order, up to the first incomplete one.
  void test();
  // Starts the buckets backward never reported ready (e.g. a layer without a hook call), waits
  // for every one in flight; then empty, for the next step.
  void finish();
  Clock::time_point last_test() const { return last_test_; }  // test() last ran, or bucket 0 started

 private:
  void start(size_t b);
  BucketWork& work_;
  std::vector<MPI_Request> requests_;
  size_t next_ = 0, completed_ = 0;
  Clock::time_point last_test_;
};

// Test: MPI_Test from the compute thread, after each launch and from the kernels' progress hook,
// at most once per poll interval. Only the thread that created it calls MPI.
class TestEngine final : public ReduceEngine {
 public:
  TestEngine(BucketWork& work, double poll_interval_us);
  ~TestEngine() override;
  void begin_step() override;
  void grads_ready_from(int64_t from) override;
  void poll() override;
  void finish() override;

 private:
  static void hook(void* self) { static_cast<TestEngine*>(self)->poll(); }
  BucketWork& work_;
  InFlight in_flight_;
  double poll_interval_us_;
  std::thread::id owner_;  // the thread that drives MPI
};

// Thread: a helper thread polls MPI_Test every poll interval while buckets are in flight and
// sleeps otherwise. Every MPI call is made under one mutex (MPI_THREAD_SERIALIZED suffices).
class ThreadEngine final : public ReduceEngine {
 public:
  // cpu: the CPU the thread is pinned to, -1 to leave it where it is created.
  ThreadEngine(BucketWork& work, double poll_interval_us, int cpu);
  ~ThreadEngine() override { stop(); }
  void grads_ready_from(int64_t from) override;
  void finish() override;

 private:
  void run();
  void stop();
  InFlight in_flight_;  // guarded by mu_
  double poll_interval_us_;
  std::mutex mu_;       // held for every MPI call (both threads) and every use of in_flight_
  std::condition_variable cv_;
  bool stop_ = false;   // guarded by mu_
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace hddp
