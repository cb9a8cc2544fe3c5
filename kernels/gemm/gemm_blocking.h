#pragma once
// Blocking sizes of the packed GEMM: the one table to retune (BLIS naming), one row per
// micro-kernel and precision.
//   MR x NR : micro-tile of C held in registers.
//   KC      : depth of a rank-KC update. The B micro-panel KC x NR stays in L1d while the
//             A micro-panel KC x MR streams past it.
//   MC      : rows of the packed A block; MC x KC sits in L2, leaving room for B micro-panels.
//   NC      : columns of the packed B panel; KC x NC lives in L3.
// Rules when retuning for another CPU: KC*NR*sizeof(T) around half of L1d, MC*KC*sizeof(T)
// a third to half of L2, MC a multiple of MR, NC a multiple of NR; then sweep MC and KC with
// `bench_gemm --benchmark_filter=hddp/s/NN/1024` (bench/results/gemm.md, "GEMM blocking").
#include <cstdint>

namespace hddp::detail {

struct Blocking {
  int64_t MR, NR, MC, KC, NC;
};

// Shape classes: each set runs one tile (micro-kernel and blocking) per class, by the product's
// shape; the threshold is a CNN's channel counts and batch (Cout 32/64, batch 64, K = Cout = 64):
//   LongK:   M and N <= kNarrowMax - a small C over a long K: a Linear layer's forward at batch
//            64 (64 x 128 x 3136); smaller ones (M*N <= 512) take the direct path (gemm_small.h);
//   Narrow:  else N <= kNarrowMax - few columns of C: a convolution's forward Y = cols W^T
//            (N = Cout: 12544 x 64 x 288);
//   Thin:    else M <= kNarrowMax or K <= kNarrowMax - few rows of C or a short K: the weight
//            gradients (M = Cout: 64 x 288 x 12544), the input gradients (K = Cout: 12544 x 288 x 64);
//   General: the rest - squares, a training step's (256, 1024..4096, 1024..4096).
enum class ShapeClass { General, Narrow, Thin, LongK };
inline constexpr ShapeClass kShapeClasses[] = {ShapeClass::General, ShapeClass::Narrow, ShapeClass::Thin,
                                               ShapeClass::LongK};
inline constexpr int64_t kNarrowMax = 128;
constexpr ShapeClass shape_class(int64_t M, int64_t N, int64_t K) {
  if (M <= kNarrowMax && N <= kNarrowMax) return ShapeClass::LongK;
  if (N <= kNarrowMax) return ShapeClass::Narrow;
  if (M <= kNarrowMax || K <= kNarrowMax) return ShapeClass::Thin;
  return ShapeClass::General;
}
// "general", "narrow", "thin", "long_k": the names in messages and wisdom files.
constexpr const char* to_string(ShapeClass c) {
  return c == ShapeClass::Narrow ? "narrow" : c == ShapeClass::Thin ? "thin" : c == ShapeClass::LongK ? "long_k" : "general";
}

// A set's tile per shape class (each one of the set's tiles: MR x NR as the set instantiates it).
struct ClassBlocking {
  Blocking general, narrow, thin, long_k;
  constexpr const Blocking& operator[](ShapeClass c) const {
    return c == ShapeClass::Narrow ? narrow : c == ShapeClass::Thin ? thin : c == ShapeClass::LongK ? long_k : general;
  }
};

// AVX2+FMA (16 ymm registers): 6 rows x 2 registers = 12 accumulators, 2 for a row of the
// B micro-panel, 1 broadcasts A. Chosen for Zen3 (L1d 32 KiB, L2 512 KiB, L3 32 MiB) from
// BLIS's zen3 configuration and a sweep: float KC*NR = 16 KiB, MC*KC = 144 KiB. One tile, the
// same for every class.
inline constexpr Blocking kAvx2Float{6, 16, 144, 256, 4080};
inline constexpr Blocking kAvx2Double{6, 8, 72, 256, 4080};
inline constexpr ClassBlocking kAvx2FloatClasses{kAvx2Float, kAvx2Float, kAvx2Float, kAvx2Float};
inline constexpr ClassBlocking kAvx2DoubleClasses{kAvx2Double, kAvx2Double, kAvx2Double, kAvx2Double};

// AVX-512F (32 zmm registers): MR rows x NR/16 (float) or NR/8 (double) registers of
// accumulators, as many for a row of B, 1 for the broadcast. General: BLIS's skx kernels use the
// same budget (24-28 accumulators); swept on a Zen5 EPYC (L1d 48 KiB, L2 1 MiB) over MR x NR in
// {14x32, 12x32, 8x48, 6x64} and MC/KC: float 12x32 with KC*NR = 32 KiB, MC*KC = 192 KiB led at
// 1024^3 and 2048^3 (bench/results/gemm.md, "GEMM blocking").
// The other classes, measured on the same Zen 5 against the other tiles, 1 thread (bench/results/gemm.md,
// "GEMM on the convolution's shapes"): narrow keeps 12x32 (12544 x 64 x 288 NT: 3-13 % ahead of
// 8x32); where M <= 128, MR = 8 divides the CNN's 32/64/128 rows that 12 pads (64 to 72): long_k
// 8x32 (N = 128 in whole registers; 16 accumulators still cover the FMA latency, 4 cycles x 2
// pipes: 64 x 128 x 3136 NT 13 % ahead of 12x32), thin 8x48 (24 FMAs per 3 loads of B, which
// it mostly reads in place, gemm_blocked.cpp: 64 x 288 x 12544 TN 15 % ahead of 8x32; N = 288 =
// 6 x 48 splits evenly over 2 threads, 9 x 32 would not). Double likewise: 8x24 and 8x16.
inline constexpr Blocking kAvx512Float{12, 32, 192, 256, 4096};
inline constexpr Blocking kAvx512Double{14, 16, 84, 384, 4096};
inline constexpr ClassBlocking kAvx512FloatClasses{kAvx512Float, kAvx512Float, {8, 48, 192, 128, 4080},
                                                   {8, 32, 192, 256, 4096}};
inline constexpr ClassBlocking kAvx512DoubleClasses{kAvx512Double, kAvx512Double, {8, 24, 96, 128, 4080},
                                                    {8, 16, 96, 384, 4096}};
// Every tile the AVX-512 set instantiates (gemm_tune and wisdom may give any class any of them).
inline constexpr Blocking kAvx512FloatTiles[] = {kAvx512Float, kAvx512FloatClasses.thin, kAvx512FloatClasses.long_k};
inline constexpr Blocking kAvx512DoubleTiles[] = {kAvx512Double, kAvx512DoubleClasses.thin,
                                                  kAvx512DoubleClasses.long_k};

// Portable C++: the AVX2 shapes (the compiler vectorises it for whatever the baseline has).
inline constexpr Blocking kPortableFloat = kAvx2Float;
inline constexpr Blocking kPortableDouble = kAvx2Double;
inline constexpr ClassBlocking kPortableFloatClasses = kAvx2FloatClasses;
inline constexpr ClassBlocking kPortableDoubleClasses = kAvx2DoubleClasses;

// Upper bounds over the tiles (the edge-tile buffer is sized by them).
inline constexpr int64_t kMaxMR = 16, kMaxNR = 48;

// Work (2*M*N*K flops) below which the packed path runs on one thread only, and the
// per-thread share above it: a parallel region costs a few microseconds, so each thread
// gets at least this much work.
inline constexpr double kMinFlopsPerThread = 4.0e6;

// The direct (unpacked) path for small products: the tutorial's (32x20)(20x1) and friends, up
// to 64^3. Taken when M*N*K <= kSmallMaxMNK and either the operand it streams is read in place
// or its copy (rows padded to what the passes read) fits kSmallMaxPack elements (gemm_small.h).
inline constexpr int64_t kSmallMaxMNK = 64 * 64 * 64;
inline constexpr int64_t kSmallMaxPack = 4096;
// And at any K where C has at most kSmallMaxMN elements and the streamed operand is read in place:
// a first convolution's weight gradient (32 x 9 over K = 50176, TN) packs 41 values per 576 flops
// of work, so packing costs more than streaming both operands once (gemm_small.h).
inline constexpr int64_t kSmallMaxMN = 32 * 16;

// gemm_bf16's blocking (gemm_bf16/): one row per set with a micro-kernel. KU is the kernel's k
// step (k is padded to it); MC a multiple of MR, NC of NR, KC of KU. The portable set has none
// (it rounds the inputs, then runs the float GEMM above).
struct Bf16Blocking {
  int64_t MR, NR, KU;  // micro-tile, and the k step of the kernel
  int64_t MC, KC, NC;  // cache blocks
};
// AVX512_BF16 (32 zmm): a 14 x 32 float tile in 28 accumulators, 2 for a k pair row of B, 1 for
// the broadcast pair of A; KU 2 (one vdpbf16ps adds a k pair); MC 12 micro-panels.
inline constexpr Bf16Blocking kBf16Avx512{14, 32, 2, 14 * 12, 512, 4096};
// AMX: the tile program's 32 x 32 float tile (four 16 x 16 accumulator tiles); KU 32 (one tile
// row of A holds 32 k, 64 bytes). KC 1024: C's tiles are loaded and stored once per KC, and at
// KC 256 that traffic took a third of the kernel's time (1024^3, C out of cache); measured on an
// Intel Xeon (family 6 model 167), one thread: KC 256 / 512 / 1024 gave 536 / 628 / 819 GFLOP/s
// at 1024^3 and 481 / 593 / 725 at 2048^3 (bf16 inputs).
inline constexpr Bf16Blocking kBf16Amx{32, 32, 32, 256, 1024, 1024};

}  // namespace hddp::detail

namespace hddp::detail {

// The built-in per-CPU choice, used where no wisdom file has an entry for this CPU
// (gemm_config.h; gemm_tune writes wisdom): the first row whose vendor, family and model range
// (display values, inclusive) match. No match: the widest set with its blocking above. Each
// row's blockings are tiles of its set (test_gemm_config checks).
struct CpuChoice {
  const char* vendor;
  int family, model_lo, model_hi;
  const char* set_s;
  ClassBlocking s;
  const char* set_d;
  ClassBlocking d;
  const char* why;  // the measurement behind the row
};

// Sapphire and Emerald Rapids (L1d 48 KiB, L2 2 MiB): gemm_tune on an Emerald Rapids (model 207,
// 1 thread) chose a deeper KC and a larger MC for the general class; the GEMM table then measured
// +3-9 % over the AVX-512 defaults at 1024^3-2048^3 (bench/results/gemm.md). Their other
// classes: the AVX-512 set's own rows (not measured on these CPUs).
inline constexpr ClassBlocking kIntelAvx512Float{{12, 32, 288, 512, 2048}, kAvx512FloatClasses.narrow,
                                                  kAvx512FloatClasses.thin, kAvx512FloatClasses.long_k};
inline constexpr ClassBlocking kIntelAvx512Double{{14, 16, 224, 512, 8192}, kAvx512DoubleClasses.narrow,
                                                   kAvx512DoubleClasses.thin, kAvx512DoubleClasses.long_k};

inline constexpr CpuChoice kCpuChoices[] = {
    // Zen 4 runs 512-bit operations at the 256-bit rate: the AVX2 kernel led at the training
    // step's thin shapes (256,4096,4096) NT 83 vs 75 GFLOP/s, TN 78 vs 72 (bench/results/gemm.md, "The tuner on this CPU").
    {"AuthenticAMD", 25, 0x10, 0x1f, "avx2", kAvx2FloatClasses, "avx2", kAvx2DoubleClasses,
     "Zen 4 (EPYC 9004): AVX2 kernel, measured ahead at thin shapes"},
    {"AuthenticAMD", 25, 0x60, 0x7f, "avx2", kAvx2FloatClasses, "avx2", kAvx2DoubleClasses,
     "Zen 4 (Ryzen 7000/8000): as EPYC 9004"},
    {"AuthenticAMD", 25, 0xa0, 0xaf, "avx2", kAvx2FloatClasses, "avx2", kAvx2DoubleClasses,
     "Zen 4c (EPYC 97x4/8004): as EPYC 9004"},
    // Sapphire and Emerald Rapids: kIntelAvx512Float/Double above.
    {"GenuineIntel", 6, 143, 143, "avx512", kIntelAvx512Float, "avx512", kIntelAvx512Double,
     "Sapphire Rapids: as Emerald Rapids"},
    {"GenuineIntel", 6, 207, 207, "avx512", kIntelAvx512Float, "avx512", kIntelAvx512Double,
     "Emerald Rapids: gemm_tune's choice there"},
};

}  // namespace hddp::detail
