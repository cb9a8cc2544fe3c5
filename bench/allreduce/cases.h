#pragma once
// The measured cases of bench_allreduce, one function per benchmark family (register.cpp
// registers them by name):
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

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include <hddp/distributed/reducer.h>

namespace hddp::bench::allreduce {

// collectives.cpp: sections 1, 1b and 2.
void bm_allreduce(benchmark::State& st, int64_t bytes, bool nonblocking, int nbc);
void bm_pairs(benchmark::State& st, int64_t bytes);
void bm_reducer(benchmark::State& st, int64_t bytes, ReduceMode mode, int nbc);

// overlap.cpp: section 3.
enum class Strategy { None, MpiTest, ReducerTest, ReducerThread };
const char* to_string(Strategy s);
void bm_overlap(benchmark::State& st, int64_t bytes, Strategy s, int nbc, double poll_us);

// step.cpp: section 4.
void bm_step(benchmark::State& st, int64_t batch, int64_t cap_bytes, bool sgd);

// table.cpp: bench/at_scale's allreduce table (bench/at_scale/step_replay.h: op,ranks,bytes,
// seconds,reduction_charged), filled by bm_allreduce and written by rank 0 with --table-csv=FILE;
// the last run of each (op, bytes) stays.
void table_row(const char* op, int ranks, int64_t bytes, double seconds);
void write_table_csv(const std::string& path);

// register.cpp: every benchmark, section 1 also at the --bytes sizes; the MPI thread level
// the ones --benchmark_filter selects need.
void register_all(const std::vector<int64_t>& extra_sizes);
int thread_level(int argc, char** argv);

}  // namespace hddp::bench::allreduce
