#include "distributed/reducer.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <sstream>
#include <vector>

#include "core/util.h"
#include "distributed/mpi_env.h"
#include "kernels/elementwise.h"
#include "kernels/progress.h"

namespace hddp {

const char* to_string(Progress p) { return p == Progress::Test ? "test" : "thread"; }

Progress parse_progress(const std::string& s) {
  if (s == "test") return Progress::Test;
  if (s == "thread") return Progress::Thread;
  HDDP_CHECK_ARG(false, "unknown progress strategy '" << s << "': expected test or thread");
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

int Reducer::required_thread_level(Progress p) {
  return p == Progress::Thread ? MPI_THREAD_SERIALIZED : MPI_THREAD_FUNNELED;
}

namespace {

// FNV-1a over the layout: names and sizes.
uint64_t layout_hash(const std::vector<ParamSlice>& layout) {
  uint64_t h = fnv1a64(nullptr, 0);
  for (const ParamSlice& s : layout) {
    h = fnv1a64(s.name.data(), s.name.size(), h);
    h = fnv1a64(&s.size, sizeof s.size, h);
  }
  return h;
}

}  // namespace

Reducer::Reducer(MPI_Comm comm, float* params, float* grads, int64_t n,
                 std::vector<ParamSlice> layout, ReducerOptions options, Trace* trace)
    : comm_(comm), grads_(grads), n_(n), opt_(options), trace_(trace) {
  HDDP_MPI(MPI_Comm_rank(comm_, &rank_));
  HDDP_MPI(MPI_Comm_size(comm_, &size_));
  HDDP_CHECK_ARG(opt_.poll_interval_us >= 0, "Reducer: poll interval must be >= 0 us");
  int provided = 0;
  HDDP_MPI(MPI_Query_thread(&provided));
  HDDP_CHECK(provided >= required_thread_level(opt_.progress),
             "Reducer: progress strategy '" << to_string(opt_.progress) << "' needs "
                 << mpi::thread_level_name(required_thread_level(opt_.progress)) << ", MPI provides "
                 << mpi::thread_level_name(provided));

  // Same model on every rank? Gather (hash, count, elements) from all and compare with rank 0;
  // every rank sees the same table, so every rank throws the same message.
  const int64_t total = layout.empty() ? 0 : layout.back().offset + layout.back().size;
  int64_t sig[3] = {static_cast<int64_t>(layout_hash(layout)), static_cast<int64_t>(layout.size()), total};
  std::vector<int64_t> all(3 * size_);
  HDDP_MPI(MPI_Allgather(sig, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, comm_));
  std::ostringstream diff;
  for (int r = 1; r < size_; ++r)
    if (!std::equal(all.begin() + 3 * r, all.begin() + 3 * r + 3, all.begin()))
      diff << "; rank " << r << " has " << all[3 * r + 1] << " tensors / " << all[3 * r + 2] << " elements";
  HDDP_CHECK(diff.str().empty(), "the model differs between ranks: rank 0 has "
                                     << all[1] << " tensors / " << all[2] << " elements" << diff.str()
                                     << " (build the same model, with the same options, on every rank)");
  HDDP_CHECK_ARG(total == n_, "Reducer: layout covers " << total << " elements but the arena has " << n_);

  buckets_ = assign_buckets(layout, sizeof(float), opt_.bucket_cap_bytes, opt_.first_bucket_cap_bytes);
  requests_.assign(buckets_.size(), MPI_REQUEST_NULL);
  done_.assign(buckets_.size(), 0);
  launched_at_.resize(buckets_.size());
  stats_.bytes_per_step = n_ * int64_t(sizeof(float));

  // Every rank starts from rank 0's parameters (large arenas in chunks: counts are int).
  for (int64_t off = 0; off < n_; off += int64_t(1) << 30)
    HDDP_MPI(MPI_Bcast(params + off, static_cast<int>(std::min<int64_t>(n_ - off, int64_t(1) << 30)), MPI_FLOAT, 0, comm_));

  if ((opt_.overlap || watched()) && opt_.nbc_iallreduce_algorithm >= 0 && size_ > 1) init_nbc_algorithm();
  if (size_ == 2) HDDP_MPI(MPI_Op_create(&mean_of_two, /*commute=*/1, &op_));
  owner_ = std::this_thread::get_id();
  if (opt_.overlap && opt_.progress == Progress::Thread) {
    thread_ = std::thread([this] { progress_thread_main(); });
    if (opt_.progress_cpu >= 0) {
      HDDP_CHECK_ARG(opt_.progress_cpu < CPU_SETSIZE, "Reducer: progress_cpu " << opt_.progress_cpu << " out of range");
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(opt_.progress_cpu, &set);
      const int rc = pthread_setaffinity_np(thread_.native_handle(), sizeof set, &set);
      if (rc != 0) {  // stop the thread before throwing: a joinable std::thread must not be destroyed
        {
          std::lock_guard<std::mutex> lock(mu_);
          stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
        HDDP_CHECK(false, "Reducer: cannot pin the progress thread to CPU " << opt_.progress_cpu << ": " << std::strerror(rc));
      }
    }
  }
}

void Reducer::init_nbc_algorithm() {
  // MPI_T at the thread level MPI already provides: Open MPI lowers MPI_Query_thread's answer
  // to the level MPI_T is initialised with.
  int level = 0, provided = 0, index = -1, count = 0, current = -1;
  HDDP_MPI(MPI_Query_thread(&level));
  if (MPI_T_init_thread(level, &provided) != MPI_SUCCESS) return;
  mpi_t_ = true;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) return;  // not Open MPI
  if (MPI_T_cvar_handle_alloc(index, nullptr, &nbc_algorithm_, &count) != MPI_SUCCESS) {
    nbc_algorithm_ = MPI_T_CVAR_HANDLE_NULL;
    return;
  }
  // Only an unset variable (0) is ours to change; every rank reads the same environment.
  if (count != 1 || MPI_T_cvar_read(nbc_algorithm_, &current) != MPI_SUCCESS || current != 0) {
    MPI_T_cvar_handle_free(&nbc_algorithm_);
    nbc_algorithm_ = MPI_T_CVAR_HANDLE_NULL;
  }
}

Reducer::~Reducer() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  set_progress_hook(nullptr, nullptr);
  if (nbc_algorithm_ != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_handle_free(&nbc_algorithm_);
  if (mpi_t_) MPI_T_finalize();
  int finalized = 1;
  MPI_Finalized(&finalized);
  if (op_ != MPI_SUM && !finalized) MPI_Op_free(&op_);
}

void Reducer::begin_step() {
  std::lock_guard<std::mutex> lock(mu_);
  HDDP_CHECK(!in_step_, "Reducer::begin_step: the previous step was not finished");
  in_step_ = true;
  next_ = completed_ = 0;
  blocked_s_ = 0;
  std::fill(done_.begin(), done_.end(), 0);
  if (!no_sync_ && opt_.overlap && opt_.progress == Progress::Test) set_progress_hook(&Reducer::gemm_hook, this);
}

void Reducer::gemm_hook(void* self) { static_cast<Reducer*>(self)->progress(); }

void Reducer::grads_ready_from(int64_t offset) {
  if (no_sync_ || !opt_.overlap) return;
  const auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    HDDP_CHECK(in_step_, "Reducer::grads_ready_from outside begin_step()/finish()");
    while (next_ < buckets_.size() && buckets_[next_].begin >= offset) launch(next_++);
    if (opt_.progress == Progress::Test && completed_ < next_) test_in_flight();
    blocked_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (opt_.progress == Progress::Thread) cv_.notify_one();
}

void Reducer::launch(size_t b) {
  const Bucket& bk = buckets_[b];
  const auto now = Clock::now();
  if (b == 0) first_launch_ = last_poll_ = now;
  launched_at_[b] = now;
  HDDP_CHECK(bk.size() <= INT32_MAX, "bucket " << b << " holds more than 2^31 elements; lower the bucket cap");
  // libnbc reads its algorithm variable when a call starts (ReducerOptions::nbc_iallreduce_algorithm).
  if (nbc_algorithm_ != MPI_T_CVAR_HANDLE_NULL) HDDP_MPI(MPI_T_cvar_write(nbc_algorithm_, &opt_.nbc_iallreduce_algorithm));
  HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, grads_ + bk.begin, static_cast<int>(bk.size()), MPI_FLOAT,
                          op_, comm_, &requests_[b]));
  if (nbc_algorithm_ != MPI_T_CVAR_HANDLE_NULL) {
    const int libnbc_choice = 0;
    HDDP_MPI(MPI_T_cvar_write(nbc_algorithm_, &libnbc_choice));
  }
}

void Reducer::complete(size_t b) {
  done_[b] = 1;
  ++completed_;
  last_complete_ = Clock::now();
  if (trace_) trace_->add("allreduce bucket " + std::to_string(b), "comm", launched_at_[b], last_complete_, 1);
}

void Reducer::wait(size_t b) {
  if (watched()) opt_.watchdog->wait(&requests_[b], "the allreduce of bucket", static_cast<int>(b));
  else HDDP_MPI(MPI_Wait(&requests_[b], MPI_STATUS_IGNORE));
}

void Reducer::test_in_flight() {
  last_poll_ = Clock::now();
  for (size_t b = completed_; b < next_; ++b) {  // buckets complete in order in practice; test all
    if (done_[b]) continue;
    int flag = 0;
    HDDP_MPI(MPI_Test(&requests_[b], &flag, MPI_STATUS_IGNORE));
    if (!flag) break;  // later buckets cannot overtake an earlier one in libnbc's schedule
    complete(b);
  }
}

void Reducer::progress() {
  if (!in_step_ || no_sync_ || opt_.progress != Progress::Test) return;
  if (std::this_thread::get_id() != owner_) return;  // only the MPI thread may call MPI
  if (completed_ == next_) return;
  const auto now = Clock::now();
  if (std::chrono::duration<double, std::micro>(now - last_poll_).count() < opt_.poll_interval_us) return;
  std::lock_guard<std::mutex> lock(mu_);
  test_in_flight();
  blocked_s_ += std::chrono::duration<double>(Clock::now() - now).count();
}

void Reducer::progress_thread_main() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto interval = std::chrono::duration<double, std::micro>(opt_.poll_interval_us);
  while (!stop_) {
    if (!in_step_ || completed_ == next_) {
      cv_.wait(lock);
      continue;
    }
    test_in_flight();
    lock.unlock();
    std::this_thread::sleep_for(interval);
    lock.lock();
  }
}

void Reducer::finish() {
  if (no_sync_) {  // accumulate: the next synchronised step reduces the sum
    std::lock_guard<std::mutex> lock(mu_);  // the progress thread reads in_step_ under it
    HDDP_CHECK(in_step_, "Reducer::finish without begin_step()");
    in_step_ = false;
    return;
  }
  const auto t0 = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    HDDP_CHECK(in_step_, "Reducer::finish without begin_step()");
    if (!opt_.overlap) {  // blocking: one allreduce per bucket, in order, each waited at once
      for (size_t b = 0; b < buckets_.size(); ++b) {
        const Bucket& bk = buckets_[b];
        if (watched()) {
          launch(b);
          wait(b);
        } else {
          launched_at_[b] = Clock::now();
          HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, grads_ + bk.begin, static_cast<int>(bk.size()), MPI_FLOAT, op_, comm_));
        }
        complete(b);
      }
      first_launch_ = t0;
      next_ = buckets_.size();
    } else {
      // Buckets backward never reported ready (e.g. a layer without a hook call) start now.
      while (next_ < buckets_.size()) launch(next_++);
      for (size_t b = 0; b < buckets_.size(); ++b)
        if (!done_[b]) {
          wait(b);
          complete(b);
        }
    }
    if (size_ > 1 && op_ == MPI_SUM) scale(n_, 1.0f / float(size_), grads_);  // 2 ranks: op_ averaged
    in_step_ = false;
  }
  set_progress_hook(nullptr, nullptr);
  const auto t1 = Clock::now();
  if (trace_) trace_->add("finish (exposed comm)", "comm", t0, t1, 0);
  ReducerTimes& last = stats_.last;
  last.exposed = std::chrono::duration<double>(t1 - t0).count() + blocked_s_;
  last.comm = buckets_.empty() ? 0.0 : std::chrono::duration<double>(last_complete_ - first_launch_).count();
  if (!opt_.overlap) last.comm = last.exposed;
  last.comm = std::max(last.comm, last.exposed);  // blocked time is communication time too
  stats_.total.comm += last.comm;
  stats_.total.exposed += last.exposed;
  ++stats_.steps;
}

}  // namespace hddp
