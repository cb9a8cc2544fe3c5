#include <hddp/distributed/reducer.h>

#include <hddp/distributed/nbc_algorithm.h>
#include <hddp/distributed/reduction_op.h>

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <thread>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/kernels/bf16.h>
#include <hddp/kernels/elementwise.h>
#include <hddp/kernels/progress.h>

namespace hddp {

const char* to_string(ReduceMode m) {
  switch (m) {
    case ReduceMode::Blocking: return "blocking";
    case ReduceMode::Test: return "test";
    case ReduceMode::Thread: return "thread";
  }
  return "?";
}

ReduceMode parse_reduce_mode(const std::string& s) {
  for (ReduceMode m : kReduceModes)
    if (s == to_string(m)) return m;
  HDDP_CHECK_ARG(false, "unknown reducer mode '" << s << "': expected blocking, test or thread");
}

bool overlaps(ReduceMode m) { return m != ReduceMode::Blocking; }

int required_thread_level(ReduceMode m) {
  return m == ReduceMode::Thread ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED;
}

int spare_progress_cpu() {
  const int places = omp_get_num_places(), threads = omp_get_max_threads();
  if (places <= threads) return -1;
  std::vector<int> ids(static_cast<size_t>(omp_get_place_num_procs(threads)));
  if (ids.empty()) return -1;
  omp_get_place_proc_ids(threads, ids.data());
  return ids.front();
}

namespace {

// The reduction op with 2 ranks: the mean of the two contributions. Any allreduce of 2 ranks
// combines the two contributions of an element exactly once (there is nothing else to
// combine: MPI ops have no identity element to fold in), in either order, so every rank gets
// fl(fl(a + b) * 0.5) - bitwise what MPI_SUM followed by the 1/P pass gives, in both modes,
// whatever algorithm MPI picks - and the pass over the gradients is saved. With more ranks an
// algorithm may combine partial results in any tree, so the reducer sums and scales.
void mean_of_two(void* in, void* inout, int* len, MPI_Datatype*) {
  const float* a = static_cast<const float*>(in);
  float* b = static_cast<float*>(inout);
  const int n = *len;
  for (int i = 0; i < n; ++i) b[i] = (a[i] + b[i]) * 0.5f;
}

}  // namespace

MPI_Op make_reduction_op(int ranks) {
  MPI_Op op = MPI_SUM;
  if (ranks == 2) HDDP_MPI(MPI_Op_create(&mean_of_two, /*commute=*/1, &op));
  return op;
}

// --grad-dtype bf16: the sum of two bf16 buffers, added in float and rounded once per add
// (Open MPI has no bf16 type: a user-defined op over 2-byte elements).
static void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const bf16* a = static_cast<const bf16*>(in);
  bf16* b = static_cast<bf16*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = to_bf16(to_float(a[i]) + to_float(b[i]));
}

static MPI_Op make_bf16_sum_op() {
  MPI_Op op = MPI_SUM;
  HDDP_MPI(MPI_Op_create(&bf16_sum, /*commute=*/1, &op));
  return op;
}

void free_reduction_op(MPI_Op& op) {
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (op != MPI_SUM && !finalized) MPI_Op_free(&op);
  op = MPI_SUM;
}

// ---- The engines, one per mode: how buckets are launched, progressed and finished ----------

class Reducer::Engine {
 public:
  virtual ~Engine() = default;
  // Launches buckets while backward runs (Test, Thread); else every bucket goes in finish().
  virtual bool overlaps() const { return true; }
  virtual void begin_step() {}  // lock not held
  // grads_ready_from launched buckets; `lock` (on mu_) is held on entry and may be released.
  virtual void launched(std::unique_lock<std::mutex>& /*lock*/) {}
  virtual void poll() {}        // the kernels' progress hook, from inside long GEMMs
  // Every bucket reduced (not yet averaged); mu_ held. t0: when finish() was called.
  virtual void finish(Reducer& r, Reducer::Clock::time_point t0);
  virtual void end_step() {}    // after finish(), lock not held
};

// Test and Thread: the buckets backward never reported ready (e.g. a layer without a hook
// call) start now; then each in-flight bucket is waited for.
void Reducer::Engine::finish(Reducer& r, Reducer::Clock::time_point) {
  while (r.step_.next < r.buckets_.size()) r.launch(r.step_.next++);
  for (size_t b = 0; b < r.buckets_.size(); ++b)
    if (!r.flight_[b].done) {
      r.wait(b);
      r.complete(b);
    }
}

// Blocking: nothing during backward; in finish, one allreduce per bucket, in order, each
// waited at once (MPI_Allreduce itself unless a watchdog or the bf16 wire needs the request).
class BlockingEngine final : public Reducer::Engine {
 public:
  bool overlaps() const override { return false; }
  void finish(Reducer& r, Reducer::Clock::time_point t0) override {
    for (size_t b = 0; b < r.buckets_.size(); ++b) {
      const Bucket& bk = r.buckets_[b];
      if (r.watched() || !r.wire_.empty()) {
        r.launch(b);
        r.wait(b);
      } else {
        r.flight_[b].launched = Reducer::Clock::now();
        HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, r.grads_ + bk.begin, static_cast<int>(bk.size()), MPI_FLOAT, r.op_, r.comm_));
      }
      r.complete(b);
    }
    r.step_.next = r.buckets_.size();
    r.step_.first_launch = t0;
  }
};

// Test mode: MPI_Test from the compute thread, after each launch and from the GEMM hook.
class TestEngine final : public Reducer::Engine {
 public:
  explicit TestEngine(Reducer& r) : r_(r), owner_(std::this_thread::get_id()) {}
  ~TestEngine() override { set_progress_hook(nullptr, nullptr); }
  void begin_step() override { set_progress_hook(&TestEngine::hook, this); }
  void launched(std::unique_lock<std::mutex>&) override {
    if (r_.step_.completed < r_.step_.next) r_.test_in_flight();
  }
  void poll() override {
    if (std::this_thread::get_id() != owner_) return;  // only the MPI thread may call MPI
    Reducer::Step& st = r_.step_;
    if (!st.active || st.completed == st.next) return;
    const auto now = Reducer::Clock::now();
    if (std::chrono::duration<double, std::micro>(now - st.last_poll).count() < r_.opt_.poll_interval_us) return;
    std::lock_guard<std::mutex> lock(r_.mu_);
    r_.test_in_flight();
    st.blocked_s += seconds_since(now);
  }
  void end_step() override { set_progress_hook(nullptr, nullptr); }

 private:
  static void hook(void* self) { static_cast<TestEngine*>(self)->poll(); }
  Reducer& r_;
  std::thread::id owner_;  // the thread that drives MPI
};

// Thread mode: a helper thread polls while buckets are in flight and sleeps otherwise.
class ThreadEngine final : public Reducer::Engine {
 public:
  ThreadEngine(Reducer& r, int cpu) : r_(r), thread_([this] { run(); }) {
    if (cpu < 0) return;
    HDDP_CHECK_ARG(cpu < CPU_SETSIZE, "Reducer: progress_cpu " << cpu << " out of range");
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    const int rc = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set);
    if (rc != 0) {  // stop the thread before throwing: a joinable std::thread must not be destroyed
      stop();
      HDDP_CHECK(false, "Reducer: cannot pin the progress thread to CPU " << cpu << ": " << std::strerror(rc));
    }
  }
  ~ThreadEngine() override { stop(); }
  void launched(std::unique_lock<std::mutex>& lock) override {
    lock.unlock();
    cv_.notify_one();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(r_.mu_);
    const auto interval = std::chrono::duration<double, std::micro>(r_.opt_.poll_interval_us);
    while (!stop_) {
      if (!r_.step_.active || r_.step_.completed == r_.step_.next) {
        cv_.wait(lock);
        continue;
      }
      r_.test_in_flight();
      lock.unlock();
      std::this_thread::sleep_for(interval);
      lock.lock();
    }
  }
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(r_.mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Reducer& r_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by r_.mu_
  std::thread thread_;  // last: starts once the members above exist
};

// ---- The reducer --------------------------------------------------------------------------

Reducer::Reducer(MPI_Comm comm, float* grads, int64_t n, const std::vector<ParamSlice>& layout,
                 ReducerOptions options, Trace* trace)
    : comm_(comm), grads_(grads), n_(n), opt_(options), trace_(trace) {
  HDDP_MPI(MPI_Comm_size(comm_, &size_));
  HDDP_CHECK_ARG(opt_.poll_interval_us >= 0, "Reducer: poll interval must be >= 0 us");
  int provided = 0;
  HDDP_MPI(MPI_Query_thread(&provided));
  HDDP_CHECK(provided >= required_thread_level(opt_.mode),
             "Reducer: mode '" << to_string(opt_.mode) << "' needs " << mpi::thread_level_name(required_thread_level(opt_.mode))
                               << ", MPI provides " << mpi::thread_level_name(provided));
  const int64_t total = layout.empty() ? 0 : layout.back().offset + layout.back().size;
  HDDP_CHECK_ARG(total == n_, "Reducer: layout covers " << total << " elements but the arena has " << n_);

  buckets_ = assign_buckets(layout, sizeof(float), opt_.bucket_cap_bytes, opt_.first_bucket_cap_bytes);
  flight_.assign(buckets_.size(), InFlight{});
  stats_.bytes_per_step = n_ * int64_t(sizeof(float));
  if (opt_.bf16_wire && size_ > 1) {  // each bucket travels as bf16, summed by bf16_sum
    wire_.resize(size_t(n_));
    wire_op_ = make_bf16_sum_op();
    stats_.bytes_per_step = n_ * int64_t(sizeof(bf16));
  }

  const bool nonblocking = overlaps(opt_.mode) || watched();
  if (nonblocking && opt_.nbc_iallreduce_algorithm >= 0 && size_ > 1) {
    nbc_ = std::make_unique<NbcAlgorithm>();
    if (!nbc_->settable()) nbc_.reset();
  }
  op_ = make_reduction_op(size_);
  switch (opt_.mode) {
    case ReduceMode::Blocking: engine_ = std::make_unique<BlockingEngine>(); break;
    case ReduceMode::Test: engine_ = std::make_unique<TestEngine>(*this); break;
    case ReduceMode::Thread: engine_ = std::make_unique<ThreadEngine>(*this, opt_.progress_cpu); break;
  }
}

Reducer::~Reducer() {
  engine_.reset();  // joins the progress thread before anything it reads goes
  free_reduction_op(op_);
  free_reduction_op(wire_op_);
}

void Reducer::begin_step() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    HDDP_CHECK(!step_.active, "Reducer::begin_step: the previous step was not finished");
    step_ = Step{};
    step_.active = true;
    for (InFlight& f : flight_) f.done = false;
  }
  if (!no_sync_) engine_->begin_step();
}

void Reducer::progress() {
  if (!no_sync_) engine_->poll();
}

void Reducer::grads_ready_from(int64_t offset) {
  if (no_sync_ || !engine_->overlaps()) return;
  const auto t0 = Clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  HDDP_CHECK(step_.active, "Reducer::grads_ready_from outside begin_step()/finish()");
  while (step_.next < buckets_.size() && buckets_[step_.next].begin >= offset) launch(step_.next++);
  engine_->launched(lock);  // Test: MPI_Test now; Thread: wakes the progress thread
  // Only this thread writes blocked_s (the progress thread never reads it).
  step_.blocked_s += seconds_since(t0);
}

void Reducer::launch(size_t b) {
  const Bucket& bk = buckets_[b];
  const auto now = Clock::now();
  if (b == 0) step_.first_launch = step_.last_poll = now;
  flight_[b].launched = now;
  HDDP_CHECK(bk.size() <= INT32_MAX, "bucket " << b << " holds more than 2^31 elements; lower the bucket cap");
  if (nbc_) nbc_->set(opt_.nbc_iallreduce_algorithm);  // libnbc reads it when a call starts
  if (!wire_.empty()) {
    to_bf16(bk.size(), grads_ + bk.begin, wire_.data() + bk.begin);
    HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, wire_.data() + bk.begin, static_cast<int>(bk.size()), MPI_UINT16_T, wire_op_,
                            comm_, &flight_[b].request));
  } else {
    HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, grads_ + bk.begin, static_cast<int>(bk.size()), MPI_FLOAT, op_, comm_,
                            &flight_[b].request));
  }
  if (nbc_) nbc_->restore();
}

void Reducer::complete(size_t b) {
  flight_[b].done = true;
  ++step_.completed;
  step_.last_complete = Clock::now();
  if (trace_) trace_->add("allreduce bucket " + std::to_string(b), "comm", flight_[b].launched, step_.last_complete, 1);
}

void Reducer::wait(size_t b) {
  if (watched()) opt_.watchdog->wait(&flight_[b].request, "the allreduce of bucket", static_cast<int>(b));
  else HDDP_MPI(MPI_Wait(&flight_[b].request, MPI_STATUS_IGNORE));
}

void Reducer::test_in_flight() {
  step_.last_poll = Clock::now();
  for (size_t b = step_.completed; b < step_.next; ++b) {  // buckets complete in order in practice; test all
    if (flight_[b].done) continue;
    int flag = 0;
    HDDP_MPI(MPI_Test(&flight_[b].request, &flag, MPI_STATUS_IGNORE));
    if (!flag) break;  // later buckets cannot overtake an earlier one in libnbc's schedule
    complete(b);
  }
}

void Reducer::finish() {
  if (no_sync_) {  // accumulate: the next synchronised step reduces the sum
    std::lock_guard<std::mutex> lock(mu_);  // the progress thread reads step_ under it
    HDDP_CHECK(step_.active, "Reducer::finish without begin_step()");
    step_.active = false;
    return;
  }
  const auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    HDDP_CHECK(step_.active, "Reducer::finish without begin_step()");
    engine_->finish(*this, t0);
    if (!wire_.empty()) to_float(n_, wire_.data(), grads_);  // the bf16 sums, back into the arena
    if (size_ > 1 && (op_ == MPI_SUM || !wire_.empty())) scale(n_, 1.0f / float(size_), grads_);  // 2 ranks: op_ averaged
    step_.active = false;
  }
  engine_->end_step();
  const auto t1 = Clock::now();
  if (trace_) trace_->add("finish (exposed comm)", "comm", t0, t1, 0);
  record_times(t0, t1);
}

void Reducer::record_times(Clock::time_point t0, Clock::time_point t1) {
  ReducerTimes& last = stats_.last;
  last.exposed = std::chrono::duration<double>(t1 - t0).count() + step_.blocked_s;
  last.comm = buckets_.empty() ? 0.0 : std::chrono::duration<double>(step_.last_complete - step_.first_launch).count();
  if (!engine_->overlaps()) last.comm = last.exposed;
  last.comm = std::max(last.comm, last.exposed);  // blocked time is communication time too
  stats_.total.comm += last.comm;
  stats_.total.exposed += last.exposed;
  ++stats_.steps;
}

}  // namespace hddp
