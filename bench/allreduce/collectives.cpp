// bench_allreduce, sections 1, 1b and 2 (cases.h): MPI_Allreduce against MPI_Iallreduce + MPI_Wait,
// the same finely interleaved, and the reducer's own path against raw MPI of the same bytes.
#include <array>
#include <vector>

#include "bench/allreduce/cases.h"
#include "bench/allreduce/common.h"
#include <hddp/core/util.h>
#include <hddp/kernels/elementwise.h>

namespace hddp::bench::allreduce {

// ---- 1. MPI_Allreduce vs MPI_Iallreduce + MPI_Wait ---------------------------------------
// In place on zeros (the sum stays finite; float addition costs the same for any normal value).
void bm_allreduce(benchmark::State& st, int64_t bytes, bool nonblocking, int nbc) {
  NbcAlgorithm algorithm;
  if (nonblocking) algorithm.set(nbc);
  const int n = static_cast<int>(bytes / int64_t(sizeof(float)));
  std::vector<float> buf(size_t(n), 0.0f);
  // Warm-up: first-touch of the buffer and of MPI's shared-memory segments.
  HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
  std::vector<double> t;
  t.reserve(size_t(st.max_iterations));
  barrier();
  for (auto _ : st) {
    const auto t0 = Clock::now();
    if (nonblocking) {
      MPI_Request req;
      HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req));
      HDDP_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
    } else {
      HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    }
    t.push_back(seconds(t0, Clock::now()));
    st.SetIterationTime(t.back());
  }
  // The mean (Time column, bytes_per_second) suffers from preemption on a shared machine;
  // the median per op is the robust figure.
  const double med = median(t);
  st.SetBytesProcessed(st.iterations() * bytes);
  st.counters["median_us"] = med * 1e6;
  st.counters["algbw_GBps"] = double(bytes) / med * 1e-9;
  st.counters["ranks"] = world_size();
  // The at-scale replay's table (--table-csv): blocking MPI_Allreduce and the reducer's
  // nonblocking call (libnbc rabenseifner), the slowest rank's median, reductions included.
  if (!nonblocking || nbc == kRabenseifner)
    table_row(nonblocking ? "iallreduce" : "allreduce", world_size(), bytes, max_over_ranks(med));
}

// ---- 1b. The same, finely interleaved ----------------------------------------------------------
// This VM alternates between two speeds for seconds at a time, so benchmarks that time one
// variant after another compare different machines. Here every iteration runs a short burst of
// each variant back to back (rotating order): MPI_Allreduce and Iallreduce+Wait with libnbc's
// binomial tree and rabenseifner, each in place (MPI_IN_PLACE, as the reducer runs it) and with
// separate send and receive buffers (as IMB and OSU time it). Counters: <variant>_us, the
// median over iterations of the burst's mean time per op, and <variant>_vs_allreduce, the
// median of the per-iteration ratio to the in-place MPI_Allreduce burst of the same iteration.
void bm_pairs(benchmark::State& st, int64_t bytes) {
  NbcAlgorithm algorithm;
  const int n = static_cast<int>(bytes / int64_t(sizeof(float)));
  std::vector<float> buf(size_t(n), 0.0f), send(size_t(n), 0.0f), recv(size_t(n), 0.0f);
  struct Variant {
    const char* name;
    bool nonblocking, in_place;
    int nbc;
  };
  const Variant variants[] = {{"allreduce_inplace", false, true, 0},       {"allreduce_separate", false, false, 0},
                              {"binomial_inplace", true, true, kBinomial},   {"binomial_separate", true, false, kBinomial},
                              {"rabenseifner_inplace", true, true, kRabenseifner},
                              {"rabenseifner_separate", true, false, kRabenseifner}};
  constexpr int kVariants = 6;
  const int burst = static_cast<int>(std::clamp<int64_t>((int64_t(1) << 20) / std::max<int64_t>(bytes, 1), 1, 8));
  auto run = [&](const Variant& v) {
    if (v.nonblocking && !algorithm.set(v.nbc)) throw Error("bm_pairs: cannot set libnbc's algorithm through MPI_T");
    const float* in = v.in_place ? static_cast<const float*>(MPI_IN_PLACE) : send.data();
    float* out = v.in_place ? buf.data() : recv.data();
    barrier();
    const auto t0 = Clock::now();
    for (int k = 0; k < burst; ++k) {
      if (v.nonblocking) {
        MPI_Request req;
        HDDP_MPI(MPI_Iallreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req));
        HDDP_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
      } else {
        HDDP_MPI(MPI_Allreduce(in, out, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
      }
    }
    return seconds(t0, Clock::now()) / burst;
  };
  for (const Variant& v : variants) run(v);  // warm-up
  std::array<std::vector<double>, kVariants> t;
  int64_t i = 0;
  for (auto _ : st) {
    for (int k = 0; k < kVariants; ++k) {
      const int which = int((i + k) % kVariants);
      t[which].push_back(max_over_ranks(run(variants[which])));  // the slowest rank's time
    }
    st.SetIterationTime(t[0].back());
    ++i;
  }
  for (int v = 0; v < kVariants; ++v) {
    std::vector<double> ratio;
    for (size_t k = 0; k < t[v].size(); ++k) ratio.push_back(t[v][k] / t[0][k]);
    st.counters[std::string(variants[v].name) + "_us"] = median(t[v]) * 1e6;
    if (v > 0) st.counters[std::string(variants[v].name) + "_vs_allreduce"] = median(ratio);
  }
  st.counters["burst"] = burst;
  st.counters["ranks"] = world_size();
}

// ---- 2. The reducer's own path vs raw MPI of the same bytes --------------------------------
void bm_reducer(benchmark::State& st, int64_t bytes, ReduceMode mode, int nbc) {
  NbcAlgorithm algorithm;  // the raw Iallreduce runs the reducer's algorithm
  algorithm.set(nbc);
  const int64_t n = bytes / int64_t(sizeof(float));
  // Each op has a buffer of its own: with the rotating order every buffer is last touched a
  // few ops earlier, so none of them finds its data in cache more often than the others.
  std::vector<float> grads(size_t(n), 1.0f), raw(size_t(n), 0.0f), raw_nb(size_t(n), 0.0f),
      scratch(size_t(n), 1.0f);
  Reducer reducer(MPI_COMM_WORLD, grads.data(), n, {{"x", 0, n}}, one_bucket(n, mode, nbc));
  HDDP_CHECK(reducer.buckets().size() == 1, "bm_reducer: expected one bucket");
  const int ni = static_cast<int>(n);
  const float inv = 1.0f / float(world_size());
  // 0: MPI_Allreduce, 1: MPI_Iallreduce + MPI_Wait, 2: the reducer's step, 3: the averaging pass
  // alone (what finish() does after the sum when there is more than one rank).
  auto op = [&](int which) {
    const auto t0 = Clock::now();
    switch (which) {
      case 0:
        HDDP_MPI(MPI_Allreduce(MPI_IN_PLACE, raw.data(), ni, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
        break;
      case 1: {
        MPI_Request req;
        HDDP_MPI(MPI_Iallreduce(MPI_IN_PLACE, raw_nb.data(), ni, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req));
        HDDP_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
        break;
      }
      case 2:
        reducer.begin_step();
        reducer.grads_ready_from(0);
        reducer.finish();
        break;
      default:
        scale(n, inv, scratch.data());
    }
    return seconds(t0, Clock::now());
  };
  constexpr int kOps = 4;
  for (int w = 0; w < kOps; ++w) op(w);  // warm-up
  std::array<std::vector<double>, kOps> t;
  for (auto& v : t) v.reserve(size_t(st.max_iterations));
  int64_t i = 0;
  barrier();
  for (auto _ : st) {
    for (int k = 0; k < kOps; ++k) {  // rotate the order: no op always runs first
      const int which = int((i + k) % kOps);
      t[which].push_back(op(which));
    }
    st.SetIterationTime(t[2].back());
    ++i;
  }
  const double ar = median(t[0]), ia = median(t[1]), red = median(t[2]);
  // Overheads from the per-iteration ratios (the ops of one iteration run back to back, so the
  // ratio cancels the slow drift of a shared machine), median over iterations.
  std::vector<double> r_ar, r_ia;
  for (size_t k = 0; k < t[2].size(); ++k) {
    r_ar.push_back(t[2][k] / t[0][k]);
    r_ia.push_back(t[2][k] / t[1][k]);
  }
  st.SetBytesProcessed(st.iterations() * bytes);
  st.counters["allreduce_us"] = ar * 1e6;
  st.counters["iallreduce_us"] = ia * 1e6;
  st.counters["reducer_us"] = red * 1e6;
  st.counters["average_us"] = world_size() > 1 ? median(t[3]) * 1e6 : 0.0;
  st.counters["overhead_pct"] = 100.0 * (median(r_ar) - 1.0);
  st.counters["overhead_vs_iallreduce_pct"] = 100.0 * (median(r_ia) - 1.0);
  st.counters["ranks"] = world_size();
}

}  // namespace hddp::bench::allreduce
