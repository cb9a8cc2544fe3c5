#include <hddp/distributed/reducer_engines.h>

#include <pthread.h>
#include <sched.h>

#include <climits>
#include <cstring>
#include <string>

#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/nbc_algorithm.h>
#include <hddp/kernels/progress.h>

namespace hddp {

// ---- BucketWork: one bucket's MPI call ------------------------------------------------------

BucketWork::BucketWork(MPI_Comm comm, const std::vector<Bucket>& buckets, Wire& wire, Watchdog* watchdog,
                       int nbc_algorithm, Trace* trace)
    : comm_(comm), buckets_(buckets), wire_(wire), watchdog_(watchdog), nbc_algorithm_(nbc_algorithm), trace_(trace),
      started_(buckets.size()) {
  if (nbc_algorithm_ >= 0) {
    nbc_ = std::make_unique<NbcAlgorithm>();
    if (!nbc_->settable()) nbc_.reset();
  }
}

BucketWork::~BucketWork() = default;

int BucketWork::elements(size_t b) const {
  HDDP_CHECK(buckets_[b].size() <= INT32_MAX, "bucket " << b << " holds more than 2^31 elements; lower the bucket cap");
  return static_cast<int>(buckets_[b].size());
}

void BucketWork::start(size_t b, MPI_Request* req) {
  const auto now = Clock::now();
  if (b == 0) times_.first_start = now;
  started_[b] = now;
  const int n = elements(b);
  if (nbc_) nbc_->set(nbc_algorithm_);  // libnbc reads it when a call starts
  void* buf = wire_.pack(buckets_[b]);
  HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf, n, wire_.type(), wire_.op(), comm_, req));
  if (nbc_) nbc_->restore();
}

void BucketWork::allreduce(size_t b) {
  started_[b] = Clock::now();
  const int n = elements(b);
  HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, wire_.pack(buckets_[b]), n, wire_.type(), wire_.op(), comm_));
}

void BucketWork::wait(size_t b, MPI_Request* req) {
  if (watchdog_) watchdog_->wait(req, "the allreduce of bucket", static_cast<int>(b));
  else HDDP_MPI(MPI_Wait(req, MPI_STATUS_IGNORE));
}

void BucketWork::done(size_t b) {
  times_.last_done = Clock::now();
  if (trace_) trace_->add("allreduce bucket " + std::to_string(b), "comm", started_[b], times_.last_done, 1);
}

// ---- Blocking -------------------------------------------------------------------------------

void BlockingEngine::finish() {
  for (size_t b = 0; b < work_.count(); ++b) {
    if (nonblocking_) {
      MPI_Request req = MPI_REQUEST_NULL;
      work_.start(b, &req);
      work_.wait(b, &req);
    } else {
      work_.allreduce(b);
    }
    work_.done(b);
  }
}

// ---- InFlight: the overlapped engines' buckets ---------------------------------------------

void InFlight::start(size_t b) {
  work_.start(b, &requests_[b]);
  if (b == 0) last_test_ = work_.started(0);
}

void InFlight::start_ready(int64_t from) {
  while (next_ < work_.count() && work_.ready(next_, from)) start(next_++);
}

void InFlight::test() {
  last_test_ = Clock::now();
  for (size_t b = completed_; b < next_; ++b) {
    int flag = 0;
    HDDP_MPI(MPI_Test(&requests_[b], &flag, MPI_STATUS_IGNORE));
    if (!flag) break;
    ++completed_;
    work_.done(b);
  }
}

void InFlight::finish() {
  while (next_ < work_.count()) start(next_++);
  for (size_t b = completed_; b < next_; ++b) {
    work_.wait(b, &requests_[b]);
    work_.done(b);
  }
  next_ = completed_ = 0;
}

// ---- Test -----------------------------------------------------------------------------------

TestEngine::TestEngine(BucketWork& work, double poll_interval_us)
    : work_(work), in_flight_(work), poll_interval_us_(poll_interval_us), owner_(std::this_thread::get_id()) {}

TestEngine::~TestEngine() { set_progress_hook(nullptr, nullptr); }

void TestEngine::begin_step() { set_progress_hook(&TestEngine::hook, this); }

void TestEngine::grads_ready_from(int64_t from) {
  in_flight_.start_ready(from);
  if (!in_flight_.idle()) in_flight_.test();
}

void TestEngine::poll() {
  if (std::this_thread::get_id() != owner_) return;  // only the MPI thread may call MPI
  if (in_flight_.idle()) return;
  const auto now = InFlight::Clock::now();
  if (std::chrono::duration<double, std::micro>(now - in_flight_.last_test()).count() < poll_interval_us_) return;
  in_flight_.test();
  work_.blocked(seconds_since(now));
}

void TestEngine::finish() {
  in_flight_.finish();
  set_progress_hook(nullptr, nullptr);
}

// ---- Thread ---------------------------------------------------------------------------------

ThreadEngine::ThreadEngine(BucketWork& work, double poll_interval_us, int cpu)
    : in_flight_(work), poll_interval_us_(poll_interval_us), thread_([this] { run(); }) {
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

void ThreadEngine::grads_ready_from(int64_t from) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.start_ready(from);
  }
  cv_.notify_one();
}

void ThreadEngine::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.finish();
}

void ThreadEngine::run() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto interval = std::chrono::duration<double, std::micro>(poll_interval_us_);
  while (!stop_) {
    if (in_flight_.idle()) {
      cv_.wait(lock);
      continue;
    }
    in_flight_.test();
    lock.unlock();
    std::this_thread::sleep_for(interval);
    lock.lock();
  }
}

void ThreadEngine::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

}  // namespace hddp
