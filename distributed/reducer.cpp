#include <hddp/distributed/reducer.h>

#include <hddp/distributed/reducer_engines.h>
#include <hddp/distributed/reducer_wire.h>

#include <omp.h>

#include <algorithm>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>

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

Reducer::Reducer(MPI_Comm comm, float* grads, int64_t n, const std::vector<ParamSlice>& layout,
                 ReducerOptions options, Trace* trace)
    : opt_(options), trace_(trace) {
  HDDP_MPI(MPI_Comm_size(comm, &size_));
  HDDP_CHECK_ARG(opt_.poll_interval_us >= 0, "Reducer: poll interval must be >= 0 us");
  int provided = 0;
  HDDP_MPI(MPI_Query_thread(&provided));
  HDDP_CHECK(provided >= required_thread_level(opt_.mode),
             "Reducer: mode '" << to_string(opt_.mode) << "' needs " << mpi::thread_level_name(required_thread_level(opt_.mode))
                               << ", MPI provides " << mpi::thread_level_name(provided));
  const int64_t total = layout.empty() ? 0 : layout.back().offset + layout.back().size;
  HDDP_CHECK_ARG(total == n, "Reducer: layout covers " << total << " elements but the arena has " << n);

  buckets_ = assign_buckets(layout, sizeof(float), opt_.bucket_cap_bytes, opt_.first_bucket_cap_bytes);
  wire_ = make_wire(opt_.bf16_wire, size_, grads, n);
  stats_.bytes_per_step = n * wire_->elem_bytes();
  Watchdog* watchdog = opt_.watchdog && opt_.watchdog->enabled() ? opt_.watchdog : nullptr;
  const bool nonblocking = overlaps(opt_.mode) || watchdog;  // every bucket an MPI_Iallreduce
  const int nbc = nonblocking && size_ > 1 ? opt_.nbc_iallreduce_algorithm : -1;
  work_ = std::make_unique<BucketWork>(comm, buckets_, *wire_, watchdog, nbc, trace);
  switch (opt_.mode) {
    case ReduceMode::Blocking:
      engine_ = std::make_unique<BlockingEngine>(*work_, watchdog || (opt_.bf16_wire && size_ > 1));
      break;
    case ReduceMode::Test: engine_ = std::make_unique<TestEngine>(*work_, opt_.poll_interval_us); break;
    case ReduceMode::Thread:
      engine_ = std::make_unique<ThreadEngine>(*work_, opt_.poll_interval_us, opt_.progress_cpu);
      break;
  }
}

Reducer::~Reducer() = default;

void Reducer::begin_step() {
  HDDP_CHECK(!active_, "Reducer::begin_step: the previous step was not finished");
  active_ = true;
  work_->begin_step();
  if (!no_sync_) engine_->begin_step();
}

void Reducer::progress() {
  if (!no_sync_) engine_->poll();
}

void Reducer::grads_ready_from(int64_t offset) {
  if (no_sync_ || !overlaps(opt_.mode)) return;
  const auto t0 = Clock::now();
  HDDP_CHECK(active_, "Reducer::grads_ready_from outside begin_step()/finish()");
  engine_->grads_ready_from(offset);  // Test: MPI_Test now; Thread: wakes the progress thread
  work_->blocked(seconds_since(t0));
}

void Reducer::finish() {
  HDDP_CHECK(active_, "Reducer::finish without begin_step()");
  if (no_sync_) {  // accumulate: the next synchronised step reduces the sum
    active_ = false;
    return;
  }
  const auto t0 = Clock::now();
  engine_->finish();
  wire_->unpack();  // the means over the ranks, into the arena
  active_ = false;
  const auto t1 = Clock::now();
  if (trace_) trace_->add("finish (exposed comm)", "comm", t0, t1, 0);
  record_times(t0, t1);
}

void Reducer::record_times(Clock::time_point t0, Clock::time_point t1) {
  const BucketWork::Times& step = work_->times();
  ReducerTimes& last = stats_.last;
  last.exposed = std::chrono::duration<double>(t1 - t0).count() + step.blocked_s;
  last.comm = buckets_.empty() ? 0.0 : std::chrono::duration<double>(step.last_done - step.first_start).count();
  if (!overlaps(opt_.mode)) last.comm = last.exposed;
  last.comm = std::max(last.comm, last.exposed);  // blocked time is communication time too
  stats_.total.comm += last.comm;
  stats_.total.exposed += last.exposed;
  ++stats_.steps;
}

}  // namespace hddp
