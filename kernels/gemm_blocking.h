#pragma once
// Blocking sizes of the packed GEMM: the one table to retune (BLIS naming).
//   MR x NR : micro-tile of C held in registers (AVX2: 12 of the 16 ymm registers
//             accumulate, 2 hold a row of the B micro-panel, 1 broadcasts A).
//   KC      : depth of a rank-KC update. The B micro-panel KC x NR (16 KiB float) stays in
//             L1d (32 KiB) while the A micro-panel KC x MR streams past it.
//   MC      : rows of the packed A block, MC x KC (float: 144 KiB) sits in L2 (512 KiB),
//             leaving room for B micro-panels and C.
//   NC      : columns of the packed B panel, KC x NC (float: 4 MiB) lives in L3 (32 MiB).
// Chosen for Zen3 (L1d 32 KiB, L2 512 KiB, L3 32 MiB) from BLIS's zen3 configuration and a
// sweep with bench_gemm (bench/RESULTS.md). To retune for another CPU: keep KC*NR*sizeof(T)
// around half of L1d, MC*KC*sizeof(T) around a third to half of L2, MC a multiple of MR,
// NC a multiple of NR; then sweep MC and KC with `bench_gemm --benchmark_filter=hddp/s/NN/1024`.
#include <cstdint>

namespace hddp::detail {

template <class T>
struct Blocking;

template <>
struct Blocking<float> {
  static constexpr int64_t MR = 6, NR = 16;
  static constexpr int64_t MC = 144, KC = 256, NC = 4080;
};

template <>
struct Blocking<double> {
  static constexpr int64_t MR = 6, NR = 8;
  static constexpr int64_t MC = 72, KC = 256, NC = 4080;
};

// Work (2*M*N*K flops) below which the packed path runs on one thread only, and the
// per-thread share above it: a parallel region costs a few microseconds, so each thread
// gets at least this much work.
inline constexpr double kMinFlopsPerThread = 4.0e6;

// The direct (unpacked) path for tiny products: the tutorial's (32x20)(20x1) and friends.
// Taken when M*N*K <= kSmallMaxMNK and the packed copy of one operand fits kSmallMaxPack.
inline constexpr int64_t kSmallMaxMNK = 32 * 32 * 32;
inline constexpr int64_t kSmallMaxPack = 4096;

}  // namespace hddp::detail
