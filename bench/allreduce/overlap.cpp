// bench_allreduce, section 3 (cases.h): an Iallreduce alongside compute of the same length, per
// progress strategy.
#include <memory>
#include <vector>

#include "bench/allreduce/cases.h"
#include "bench/allreduce/common.h"
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/kernels/gemm.h>

namespace hddp::bench::allreduce {

// ---- 3. Overlap ------------------------------------------------------------------------------
const char* to_string(Strategy s) {
  switch (s) {
    case Strategy::None: return "none";
    case Strategy::MpiTest: return "mpi_test";
    case Strategy::ReducerTest: return "reducer_test";
    case Strategy::ReducerThread: return "reducer_thread";
  }
  return "?";
}

// The compute: `units` GEMMs of 128 x 128 x 128 (4.2 MFLOP, ~55 us on one Zen3 core) on
// cache-resident operands, through hddp::gemm (the blocked backend, which calls the progress
// hook from inside). `between` runs after every GEMM.
struct Compute {
  static constexpr int64_t D = 128;
  std::vector<float> a, b, c;
  Compute() : a(D * D), b(D * D), c(D * D) {
    Rng rng(3);
    for (auto& v : a) v = rng.uniform(-1.0f, 1.0f);
    for (auto& v : b) v = rng.uniform(-1.0f, 1.0f);
  }
  template <class F>
  void run(int64_t units, F&& between) {
    for (int64_t u = 0; u < units; ++u) {
      gemm(Trans::No, Trans::No, D, D, D, 1.0f, a.data(), D, b.data(), D, 0.0f, c.data(), D);
      between();
    }
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  void run(int64_t units) {
    run(units, [] {});
  }
};

void bm_overlap(benchmark::State& st, int64_t bytes, Strategy s, int nbc, double poll_us) {
  set_gemm_backend(GemmBackend::Blocked);
  NbcAlgorithm algorithm;
  algorithm.set(nbc);
  const int64_t n = bytes / int64_t(sizeof(float));
  const int ni = static_cast<int>(n);
  std::vector<float> grads(size_t(n), 1.0f), raw(size_t(n), 0.0f);
  std::unique_ptr<Reducer> reducer;
  if (s == Strategy::ReducerTest || s == Strategy::ReducerThread)
    reducer = std::make_unique<Reducer>(
        MPI_COMM_WORLD, grads.data(), n, std::vector<ParamSlice>{{"x", 0, n}},
        one_bucket(n, s == Strategy::ReducerThread ? ReduceMode::Thread : ReduceMode::Test, nbc, poll_us));
  Compute compute;
  MPI_Request req = MPI_REQUEST_NULL;

  auto start = [&] {
    if (reducer) {
      reducer->begin_step();
      reducer->grads_ready_from(0);
    } else {
      HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, raw.data(), ni, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req));
    }
  };
  auto wait = [&] {
    if (reducer) reducer->finish();
    else HDDP_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
  };
  auto poll = [&] {
    if (s == Strategy::MpiTest && req != MPI_REQUEST_NULL) {
      int flag = 0;
      HDDP_MPI(MPI_Test(&req, &flag, MPI_STATUS_IGNORE));
    } else if (s == Strategy::ReducerTest) {
      reducer->progress();
    }
  };
  auto pure = [&] {
    barrier();
    const auto t0 = Clock::now();
    start();
    wait();
    return seconds(t0, Clock::now());
  };
  auto alone = [&](int64_t units) {
    barrier();
    const auto t0 = Clock::now();
    compute.run(units);
    return seconds(t0, Clock::now());
  };
  auto overlapped = [&](int64_t units) {
    barrier();
    const auto t0 = Clock::now();
    start();
    compute.run(units, poll);
    wait();
    return seconds(t0, Clock::now());
  };

  // Calibration: the compute lasts the strategy's pure communication time (the slowest
  // rank's median), on every rank with that rank's own GEMM speed.
  std::vector<double> cal;
  for (int k = 0; k < 15; ++k) cal.push_back(pure());
  const double target = max_over_ranks(median(cal));
  alone(20);  // warm
  cal.clear();
  for (int k = 0; k < 5; ++k) cal.push_back(alone(20) / 20);
  const double unit = median(cal);
  const int64_t units = std::max<int64_t>(1, static_cast<int64_t>(target / unit + 0.5));

  std::vector<double> tp, tc, to;
  for (auto _ : st) {
    tp.push_back(pure());
    tc.push_back(alone(units));
    to.push_back(overlapped(units));
    st.SetIterationTime(to.back());
  }
  // Per-rank medians, averaged over ranks (as OSU averages its times over ranks).
  const double p = mean_over_ranks(median(tp)), c = mean_over_ranks(median(tc)), o = mean_over_ranks(median(to));
  // The same formula per iteration (its three phases run back to back), median over
  // iterations, averaged over ranks: less sensitive to a phase that caught a busy core.
  std::vector<double> per_iter;
  for (size_t k = 0; k < to.size(); ++k) per_iter.push_back(1.0 - (to[k] - tc[k]) / tp[k]);
  st.counters["pure_us"] = p * 1e6;
  st.counters["compute_us"] = c * 1e6;
  st.counters["overall_us"] = o * 1e6;
  st.counters["exposed_us"] = (o - c) * 1e6;
  st.counters["overlap_pct"] = 100.0 * (1.0 - (o - c) / p);
  st.counters["overlap_iter_pct"] = 100.0 * mean_over_ranks(median(per_iter));
  st.counters["unit_us"] = mean_over_ranks(unit) * 1e6;
  st.counters["ranks"] = world_size();
}

}  // namespace hddp::bench::allreduce
