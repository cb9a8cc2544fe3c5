#pragma once
// FMA-throughput probe: the peak floating-point rate this machine reaches per instruction set,
// the yardstick every GEMM figure is reported against (bench_gemm's peak_pct column).
// Each thread runs 12 independent chains of register-only FMAs (enough to cover the FMA
// latency on every x86 core of the last decade), so the rate is the FMA units' throughput.
#include <cstdint>

namespace hddp::bench {

enum class Isa { Avx2, Avx512 };

const char* to_string(Isa isa);
bool isa_supported(Isa isa);  // the CPU and OS can execute it (kernels' CPUID + XGETBV check)

// GFLOP/s (an FMA counts 2 flops) of `threads` OpenMP threads each running the probe for about
// `seconds`; 0 when the CPU lacks the instruction set.
double fma_peak_gflops(Isa isa, bool dbl, int threads, double seconds = 0.2);

// The widest instruction set the CPU supports (AVX-512, else AVX2); the machine's peak.
Isa widest_isa();

namespace detail {
// The register-only loops, one file per instruction set (peak_avx2.cpp, peak_avx512.cpp):
// run `iters` iterations, return the flops executed.
int64_t fma_loop_avx2(bool dbl, int64_t iters);
int64_t fma_loop_avx512(bool dbl, int64_t iters);
}  // namespace detail

}  // namespace hddp::bench
