// Allreduce, the data-parallel reducer and compute/communication overlap, under mpiexec.
// Only rank 0 reports; every other rank runs the same benchmarks with a null reporter. Every
// benchmark has a fixed iteration count (Iterations()), so all ranks run the same number of
// collectives whatever their timings - letting Google Benchmark size the runs per rank would
// deadlock.
//
//   allreduce/blocking/<bytes>          MPI_Allreduce(MPI_IN_PLACE, float, SUM), timed per op
//   allreduce/iallreduce_wait/<bytes>/nbc:<binomial|rabenseifner>
//                                       MPI_Iallreduce + MPI_Wait with Open MPI's coll/libnbc
//                                       algorithm set through MPI_T (binomial is libnbc's own
//                                       choice for in-place calls and below 4 ranks). Counters
//                                       median_us and algbw_GBps = bytes / median time per op
//                                       (algorithm bandwidth); Time and bytes_per_second are means
//   pairs/<bytes>                       the same finely interleaved: every iteration runs a
//                                       short burst of each of MPI_Allreduce, Iallreduce+Wait
//                                       binomial and rabenseifner, each in place and with
//                                       separate buffers, back to back (the VM's speed drifts
//                                       over seconds); per-iteration ratios to MPI_Allreduce
//   allreduce/reducer/<mode>/<bytes>    one Reducer step (begin_step, grads_ready_from(0),
//                                       finish) over one bucket of <bytes>; mode blocking |
//                                       test | thread (overlapped, nothing to overlap) with the
//                                       reducer's default libnbc algorithm, test_binomial with
//                                       libnbc's binomial tree. Timed in the same loop as raw
//                                       MPI_Allreduce, raw Iallreduce+Wait (same algorithm) and
//                                       the averaging pass alone, the four in rotating order;
//                                       counters: medians, overhead_pct = median over
//                                       iterations of reducer / MPI_Allreduce - 1 (and vs
//                                       Iallreduce+Wait)
//   overlap/<strategy>/<bytes>/nbc:<alg>[/poll_us:<p>]
//                                       an Iallreduce of <bytes> alongside compute of the same
//                                       duration (a loop of 128^3 hddp GEMMs, calibrated per
//                                       rank to the strategy's pure communication time), each
//                                       iteration measuring, after a barrier each: pure comm,
//                                       compute alone (no MPI at all), comm + compute. Strategies:
//                                         none            Iallreduce, compute, Wait
//                                         mpi_test        MPI_Test after every GEMM (~50 us)
//                                         reducer_test    Reducer, ReduceMode::Test: progress()
//                                                         after every GEMM + the GEMM hook
//                                         reducer_thread  Reducer, ReduceMode::Thread
//                                       overlap_pct = 100 (1 - (overall - compute) / pure), the
//                                       OSU formula with `compute` from the run WITHOUT
//                                       communication (medians per rank, averaged over ranks);
//                                       overlap_iter_pct: the same per iteration, median
//                                       over iterations; exposed_us = overall - compute
//   step/wide/b<batch>/cap<MiB>[/sgd]   training step of 1 -> 1024 x4 (tanh) -> 1, Adam (or SGD), per
//                                       rank batch <batch>, bucket cap <MiB> (first bucket
//                                       1 MiB); each iteration runs one step of each of six
//                                       models in rotating order: local (no reducer), blocking,
//                                       test / thread (overlapped, ReduceMode::Test / ::Thread,
//                                       the reducer's default libnbc algorithm) and
//                                       test_binomial / thread_binomial (libnbc's binomial),
//                                       test_watchdog / blocking_watchdog (the stall watchdog on,
//                                       timeout 300 s, as poly_train's default).
//                                       Counters: median step ms per mode, comm share of the
//                                       blocking step, exposed comm, overlap (ReducerStats),
//                                       step / blocking step ratios and <mode>_watchdog_vs_off
//                                       (the watchdog's cost) (per round, median).
//
// --bytes=N[,N...] (ours): the allreduce/ benchmarks of section 1 at these sizes as well, e.g. a
// model's gradient bytes per step (bench/link/link_table.sh: communication alone over a link).
// --table-csv=FILE (ours, not Google Benchmark's): rank 0 writes the allreduce/blocking and
// allreduce/iallreduce_wait/*/nbc:rabenseifner medians as bench/at_scale's allreduce table
// (op,ranks,bytes,seconds,reduction_charged = 1), the table a cluster run gives the replay.
// Run (see bench/RESULTS.md):
//   OMP_NUM_THREADS=1 mpiexec --allow-run-as-root --oversubscribe --bind-to none -n 2
//     build-bench/bench/bench_allreduce --benchmark_repetitions=5
//     --benchmark_report_aggregates_only=true
// It also runs as a plain process (an MPI singleton, 1 rank). Random interleaving and warm-up
// time are refused with more than one rank (Google Benchmark seeds its shuffle per process,
// and warm-up sizes itself by time: either would desynchronise the collectives).
#include <benchmark/benchmark.h>
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "bench/at_scale/step_replay.h"
#include "bench/mlp_1024x4.h"
#include "bench/mpi_world.h"
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/nbc_algorithm.h>
#include <hddp/distributed/reducer.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/kernels/gemm.h>

namespace {

using namespace hddp;
using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }


using hddp::bench::max_over_ranks, hddp::bench::mean_over_ranks, hddp::bench::world_size;

void barrier() { HDDP_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

// libnbc's iallreduce algorithm (distributed/nbc_algorithm.h): one guard per benchmark sets it
// for the raw MPI_Iallreduce calls, unless the environment already set it.
constexpr int kBinomial = kNbcBinomial, kRabenseifner = kNbcRabenseifner;
const char* nbc_name(int a) { return a == kBinomial ? "binomial" : a == kRabenseifner ? "rabenseifner" : "?"; }

std::string size_name(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

// Fixed iteration counts: about `budget` bytes moved per benchmark, within [lo, hi].
int64_t iterations_for(int64_t bytes, double budget, int64_t lo, int64_t hi) {
  return std::clamp<int64_t>(static_cast<int64_t>(budget / double(bytes)), lo, hi);
}

// One bucket covering n floats: caps at least the whole size.
ReducerOptions one_bucket(int64_t n, ReduceMode mode, int nbc, double poll_us = 50) {
  ReducerOptions o;
  o.nbc_iallreduce_algorithm = nbc;
  o.bucket_cap_bytes = o.first_bucket_cap_bytes = std::max<int64_t>(n * int64_t(sizeof(float)), 1);
  o.mode = mode;
  o.poll_interval_us = poll_us;
  return o;
}

// bench/at_scale's allreduce table (bench/at_scale/step_replay.h: op,ranks,bytes,seconds,
// reduction_charged), filled by bm_allreduce and written by rank 0 with --table-csv=FILE.
struct TableRow {
  const char* op;
  int ranks;
  int64_t bytes;
  double seconds;
};
std::map<std::pair<std::string, int64_t>, TableRow> g_table;  // the last run of each (op, bytes)

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
    g_table[{nonblocking ? "iallreduce" : "allreduce", bytes}] = {nonblocking ? "iallreduce" : "allreduce", world_size(),
                                                                  bytes, max_over_ranks(med)};
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

// ---- 3. Overlap ------------------------------------------------------------------------------
enum class Strategy { None, MpiTest, ReducerTest, ReducerThread };
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

// ---- 4. Training step of the MLP 1-1024x4-1 (mlp_1024x4.h; benchmarks step/wide) -------------
void bm_step(benchmark::State& st, int64_t batch, int64_t cap_bytes, bool sgd) {
  set_gemm_backend(GemmBackend::Blocked);
  int rank = 0;
  HDDP_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  // This rank's shard: its own inputs and targets.
  Rng data_rng(11, uint64_t(rank));
  std::vector<float> x(static_cast<size_t>(batch)), y(static_cast<size_t>(batch));
  for (auto& v : x) v = data_rng.uniform(-1.0f, 1.0f);
  for (auto& v : y) v = data_rng.uniform(-0.9f, 0.9f);

  struct Mode {
    const char* name;
    bool ddp;
    ReduceMode mode;
    int nbc;
    bool watchdog = false;
  };
  // The reducer's defaults (libnbc rabenseifner) and, for comparison, libnbc's binomial tree;
  // the default mode and the blocking one again with the stall watchdog (poly_train's default,
  // --timeout 300) waiting on the buckets. The other modes wait with MPI_Wait (--timeout 0).
  const Mode modes[] = {{"local", false, ReduceMode::Blocking, kRabenseifner},
                        {"blocking", true, ReduceMode::Blocking, kRabenseifner},
                        {"test", true, ReduceMode::Test, kRabenseifner},
                        {"thread", true, ReduceMode::Thread, kRabenseifner},
                        {"test_binomial", true, ReduceMode::Test, kBinomial},
                        {"thread_binomial", true, ReduceMode::Thread, kBinomial},
                        {"test_watchdog", true, ReduceMode::Test, kRabenseifner, true},
                        {"blocking_watchdog", true, ReduceMode::Blocking, kRabenseifner, true}};
  Watchdog watchdog(MPI_COMM_WORLD, WatchdogOptions{300});
  struct Runner {
    Mode mode;
    std::unique_ptr<Sequential<float>> model;
    std::unique_ptr<DistributedModel> ddp;  // null: local (no reducer)
    std::unique_ptr<Optimizer<float>> opt;
    std::vector<double> step, comm, exposed, overlap;
  };
  std::vector<Runner> runners;
  for (const Mode& m : modes) {
    Runner r;
    r.mode = m;
    Rng rng(1);
    r.model = std::make_unique<Sequential<float>>(mlp_1024x4(), batch, rng);
    if (m.ddp) {
      ReducerOptions o;
      o.bucket_cap_bytes = cap_bytes;
      o.mode = m.mode;
      o.nbc_iallreduce_algorithm = m.nbc;
      if (m.watchdog) o.watchdog = &watchdog;
      r.ddp = std::make_unique<DistributedModel>(MPI_COMM_WORLD, *r.model, o);
    }
    if (sgd) r.opt = std::make_unique<SGD<float>>(r.model->num_params(), SgdHyper{.lr = 1e-3});
    else r.opt = std::make_unique<Adam<float>>(r.model->num_params(), AdamHyper{.lr = 1e-4});
    runners.push_back(std::move(r));
  }
  MseLoss<float> mse(runners.front().model->out_features());
  auto step = [&](Runner& r) {
    const auto t0 = Clock::now();
    r.model->zero_grad();
    benchmark::DoNotOptimize(mse.forward(r.model->forward(x, batch), y.data(), batch));
    if (r.ddp) r.ddp->backward(mse.grad());
    else r.model->backward(mse.grad());
    r.opt->step(r.model->params(), r.model->grads());
    return seconds(t0, Clock::now());
  };
  for (auto& r : runners) step(r);  // warm-up: first touch of every buffer
  int64_t i = 0;
  const size_t nr = runners.size();
  barrier();
  for (auto _ : st) {
    double round = 0;
    for (size_t k = 0; k < nr; ++k) {  // rotate the order of the modes
      Runner& r = runners[(size_t(i) + k) % nr];
      const double t = step(r);
      round += t;
      r.step.push_back(t);
      if (r.ddp) {
        const ReducerTimes& last = r.ddp->reducer().stats().last;
        r.comm.push_back(last.comm);
        r.exposed.push_back(last.exposed);
        r.overlap.push_back(last.overlap());
      }
    }
    st.SetIterationTime(round);
    ++i;
  }
  // Ratios to the blocking step of the same round (the six steps of a round run back to back),
  // median over rounds: robust to the slow drift of a shared machine.
  const std::vector<double>& blocking = runners[1].step;
  std::vector<double> share;
  for (size_t k = 0; k < blocking.size(); ++k) share.push_back(runners[1].comm[k] / blocking[k]);
  for (Runner& r : runners) {
    const std::string name = r.mode.name;
    st.counters[name + "_ms"] = median(r.step) * 1e3;
    std::vector<double> ratio;
    for (size_t k = 0; k < blocking.size(); ++k) ratio.push_back(r.step[k] / blocking[k]);
    if (&r != &runners[1]) st.counters[name + "_ratio"] = median(ratio);
    if (!r.ddp) continue;
    st.counters[name + "_comm_ms"] = median(r.comm) * 1e3;
    if (!overlaps(r.mode.mode)) continue;
    st.counters[name + "_exposed_ms"] = median(r.exposed) * 1e3;
    st.counters[name + "_overlap_pct"] = 100.0 * median(r.overlap);
  }
  // The watchdog's cost: its step over the same mode without it, per round, median.
  auto runner = [&](const char* name) -> const Runner& {
    return *std::find_if(runners.begin(), runners.end(), [&](const Runner& r) { return !std::strcmp(r.mode.name, name); });
  };
  for (const char* base : {"test", "blocking"}) {
    const std::vector<double>& off = runner(base).step;
    const std::vector<double>& on = runner((std::string(base) + "_watchdog").c_str()).step;
    std::vector<double> ratio;
    for (size_t k = 0; k < off.size(); ++k) ratio.push_back(on[k] / off[k]);
    st.counters[std::string(base) + "_watchdog_vs_off"] = median(ratio);
  }
  st.counters["comm_share_pct"] = 100.0 * median(share);
  st.counters["buckets"] = double(runners[1].ddp->reducer().buckets().size());
  st.counters["params"] = double(runners[0].model->num_params());
  st.counters["ranks"] = world_size();
}

class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

bool has_flag(int argc, char** argv, const char* prefix) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

// Every registered name, for thread_level() below.
std::vector<std::string> g_names;

template <class F>
benchmark::internal::Benchmark* reg(const std::string& name, F&& fn) {
  g_names.push_back(name);
  return benchmark::RegisterBenchmark(name.c_str(), std::forward<F>(fn));
}

// The lowest MPI thread level the benchmarks selected by --benchmark_filter need: SERIALIZED
// when one runs a progress thread (names with "thread", and every step/ benchmark, which runs
// the thread modes), FUNNELED otherwise. The level has a cost of its own: SERIALIZED adds
// 0.1-0.15 us to a small allreduce here (bench/RESULTS.md).
int thread_level(int argc, char** argv) {
  std::string filter = ".";  // Google Benchmark's default: everything
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--benchmark_filter=", 19) == 0) filter = argv[i] + 19;
  const bool negative = !filter.empty() && filter[0] == '-';
  const std::regex re(negative ? filter.substr(1) : filter);
  for (const std::string& name : g_names)
    if (std::regex_search(name, re) != negative && (name.find("thread") != std::string::npos || name.rfind("step/", 0) == 0))
      return MPI_THREAD_SERIALIZED;
  return MPI_THREAD_FUNNELED;
}

void register_all(const std::vector<int64_t>& extra_sizes) {
  const int nbcs[] = {kBinomial, kRabenseifner};
  // 1. latency / bandwidth, 4 B ... 64 MiB in powers of 4, and the --bytes sizes: MPI_Allreduce,
  //    then Iallreduce + Wait with libnbc's binomial tree (its choice here) and with rabenseifner.
  std::vector<int64_t> sizes;
  for (int64_t bytes = 4; bytes <= (int64_t(64) << 20); bytes *= 4) sizes.push_back(bytes);
  sizes.insert(sizes.end(), extra_sizes.begin(), extra_sizes.end());
  for (size_t i = 0; i < sizes.size(); ++i)
    for (int variant = 0; variant < 3; ++variant) {
      const int64_t bytes = sizes[i];
      const bool nb = variant > 0;
      const int nbc = variant == 2 ? kRabenseifner : kBinomial;
      // A --bytes size is named in bytes, as given ("1583104B", not "1546KiB").
      const std::string size = i + extra_sizes.size() >= sizes.size() ? std::to_string(bytes) + "B" : size_name(bytes);
      std::string name = std::string("allreduce/") + (nb ? "iallreduce_wait/" : "blocking/") + size;
      if (nb) name += std::string("/nbc:") + nbc_name(nbc);
      reg(name, [bytes, nb, nbc](benchmark::State& st) { bm_allreduce(st, bytes, nb, nbc); })
          ->Iterations(iterations_for(bytes, double(int64_t(1) << 28), 10, 50000))
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  // 1b. the same, finely interleaved (in place and separate buffers), 4 B ... 64 MiB.
  for (int64_t bytes = 4; bytes <= (int64_t(64) << 20); bytes *= 4)
    reg("pairs/" + size_name(bytes), [bytes](benchmark::State& st) { bm_pairs(st, bytes); })
        ->Iterations(iterations_for(bytes, double(int64_t(1) << 27), 12, 400))
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
  // 2. reducer overhead: its three modes with its default libnbc algorithm, and Test mode
  //    with libnbc's binomial tree.
  const struct {
    const char* name;
    ReduceMode mode;
    int nbc;
  } rmodes[] = {{"blocking", ReduceMode::Blocking, kRabenseifner},
                {"test", ReduceMode::Test, kRabenseifner},
                {"thread", ReduceMode::Thread, kRabenseifner},
                {"test_binomial", ReduceMode::Test, kBinomial}};
  for (int64_t bytes : {int64_t(4), int64_t(1) << 10, int64_t(64) << 10, int64_t(1) << 20, int64_t(4) << 20,
                        int64_t(16) << 20, int64_t(64) << 20})
    for (const auto& m : rmodes) {
      const std::string name = std::string("allreduce/reducer/") + m.name + "/" + size_name(bytes);
      reg(name, [bytes, m](benchmark::State& st) { bm_reducer(st, bytes, m.mode, m.nbc); })
          ->Iterations(iterations_for(bytes, double(int64_t(1) << 27), 10, 20000))
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  // 3. overlap per strategy, size and libnbc algorithm; then the reducer's poll interval.
  auto overlap_iters = [](int64_t bytes) -> int64_t { return bytes <= (int64_t(1) << 20) ? 60 : bytes <= (int64_t(4) << 20) ? 30 : 12; };
  const Strategy strategies[] = {Strategy::None, Strategy::MpiTest, Strategy::ReducerTest, Strategy::ReducerThread};
  for (int64_t bytes : {int64_t(1) << 20, int64_t(4) << 20, int64_t(16) << 20})
    for (int nbc : nbcs)
      for (Strategy s : strategies) {
        const std::string name = std::string("overlap/") + to_string(s) + "/" + size_name(bytes) + "/nbc:" + nbc_name(nbc);
        reg(name, [bytes, s, nbc](benchmark::State& st) { bm_overlap(st, bytes, s, nbc, 50); })
            ->Iterations(overlap_iters(bytes))
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  for (int nbc : nbcs)
    for (double poll : {10.0, 200.0, 1000.0})
      for (Strategy s : {Strategy::ReducerTest, Strategy::ReducerThread}) {
        const int64_t bytes = int64_t(4) << 20;
        const std::string name = std::string("overlap/") + to_string(s) + "/" + size_name(bytes) + "/nbc:" +
                                 nbc_name(nbc) + "/poll_us:" + std::to_string(int(poll));
        reg(name, [bytes, s, nbc, poll](benchmark::State& st) { bm_overlap(st, bytes, s, nbc, poll); })
            ->Iterations(overlap_iters(bytes))
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
  // 4. the MLP 1-1024x4-1's training step, Adam; then plain SGD at batch 8, where the optimizer no longer
  //    dominates the step and communication is a larger share of it.
  for (int64_t batch : {256, 32, 8})
    for (int64_t cap_mib : {25, 4}) {
      const std::string name = "step/wide/b" + std::to_string(batch) + "/cap" + std::to_string(cap_mib) + "MiB";
      reg(name, [batch, cap_mib](benchmark::State& st) { bm_step(st, batch, cap_mib << 20, false); })
          ->Iterations(batch >= 256 ? 8 : batch >= 32 ? 20 : 30)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  for (int64_t cap_mib : {25, 4}) {
    const int64_t batch = 8;
    const std::string name = "step/wide/b" + std::to_string(batch) + "/cap" + std::to_string(cap_mib) + "MiB/sgd";
    reg(name, [batch, cap_mib](benchmark::State& st) { bm_step(st, batch, cap_mib << 20, true); })
        ->Iterations(40)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

// --bytes=N[,N...] (ours): section 1 for these sizes too (a model's gradient bytes per step).
std::vector<int64_t> extra_sizes(int argc, char** argv) {
  std::vector<int64_t> v;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--bytes=", 8) != 0) continue;
    std::string list = argv[i] + 8;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string item = list.substr(at, comma - at);
      char* end = nullptr;
      const long long n = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || n < 4 || n % 4 != 0 || n > (int64_t(1) << 31))
        throw Error("bench_allreduce: --bytes: '" + item + "' is not a whole number of floats' bytes (4 to 2^31, a multiple of 4)");
      v.push_back(n);
      at = comma + 1;
    }
  }
  return v;
}

int main(int argc, char** argv) {
  try {
    register_all(extra_sizes(argc, argv));
    hddp::mpi::Env env(&argc, &argv, thread_level(argc, argv));
    if (env.size() > 1 && (has_flag(argc, argv, "--benchmark_enable_random_interleaving") ||
                           has_flag(argc, argv, "--benchmark_min_warmup_time")))
      throw Error("bench_allreduce: --benchmark_enable_random_interleaving and --benchmark_min_warmup_time "
                  "differ between ranks and would deadlock the collectives; run without them");
    // --table-csv=FILE is ours, not Google Benchmark's: taken out before it parses.
    std::string table_csv;
    std::vector<char*> args(argv, argv + argc);
    for (auto it = args.begin() + 1; it != args.end();)
      if (std::strncmp(*it, "--table-csv=", 12) == 0) table_csv = *it + 12, it = args.erase(it);
      else if (std::strncmp(*it, "--bytes=", 8) == 0) it = args.erase(it);
      else ++it;
    // Other ranks: no file output either (they would overwrite rank 0's --benchmark_out).
    if (!env.root())
      args.erase(std::remove_if(args.begin() + 1, args.end(),
                                [](char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; }),
                 args.end());
    int nargs = static_cast<int>(args.size());
    args.push_back(nullptr);
    benchmark::Initialize(&nargs, args.data());
    if (benchmark::ReportUnrecognizedArguments(nargs, args.data())) return 1;
    benchmark::AddCustomContext("mpi_ranks", std::to_string(env.size()));
    benchmark::AddCustomContext("mpi_thread_level", mpi::thread_level_name(env.thread_level()));
    benchmark::AddCustomContext("omp_max_threads", std::to_string(omp_get_max_threads()));
    benchmark::AddCustomContext("hddp_kernel", gemm_kernel_name());
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
    int len = 0;
    HDDP_MPI(MPI_Get_library_version(version, &len));
    std::string v(version);
    benchmark::AddCustomContext("mpi_library", v.substr(0, v.find(',')));
    benchmark::AddCustomContext("libnbc_iallreduce_algorithm_env", NbcAlgorithm().current());
    if (env.root()) {
      benchmark::RunSpecifiedBenchmarks();
    } else {
      NullReporter null;
      benchmark::RunSpecifiedBenchmarks(&null);
    }
    benchmark::Shutdown();
    if (env.root() && !table_csv.empty()) {
      std::string csv = std::string(kAllreduceTableHeader) + "\n";
      char line[128];
      for (const auto& [key, r] : g_table) {
        std::snprintf(line, sizeof line, "%s,%d,%lld,%.9g,1\n", r.op, r.ranks, (long long)r.bytes, r.seconds);
        csv += line;
      }
      write_file_atomic(table_csv, csv);
    }
    barrier();
  } catch (const std::exception& e) {
    mpi::abort_all(1, e.what());
  }
  return 0;
}
