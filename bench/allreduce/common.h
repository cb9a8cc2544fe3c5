#pragma once
// What the parts of bench_allreduce share: the clock, a barrier, libnbc's algorithms by name,
// benchmark size names, fixed iteration counts and one-bucket reducer options.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "bench/mpi_world.h"
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/nbc_algorithm.h>
#include <hddp/distributed/reducer.h>

namespace hddp::bench::allreduce {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

inline void barrier() { HDDP_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

// libnbc's iallreduce algorithm (distributed/nbc_algorithm.h): one guard per benchmark sets it
// for the raw MPI_Iallreduce calls, unless the environment already set it.
constexpr int kBinomial = kNbcBinomial, kRabenseifner = kNbcRabenseifner;
inline const char* nbc_name(int a) { return a == kBinomial ? "binomial" : a == kRabenseifner ? "rabenseifner" : "?"; }

inline std::string size_name(int64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= (1 << 10) && bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

// Fixed iteration counts: about `budget` bytes moved per benchmark, within [lo, hi].
inline int64_t iterations_for(int64_t bytes, double budget, int64_t lo, int64_t hi) {
  return std::clamp<int64_t>(static_cast<int64_t>(budget / double(bytes)), lo, hi);
}

// One bucket covering n floats: caps at least the whole size.
inline ReducerOptions one_bucket(int64_t n, ReduceMode mode, int nbc, double poll_us = 50) {
  ReducerOptions o;
  o.nbc_iallreduce_algorithm = nbc;
  o.bucket_cap_bytes = o.first_bucket_cap_bytes = std::max<int64_t>(n * int64_t(sizeof(float)), 1);
  o.mode = mode;
  o.poll_interval_us = poll_us;
  return o;
}

}  // namespace hddp::bench::allreduce
