#pragma once
// FMA-throughput probe: the peak floating-point rate this machine reaches per instruction set,
// the yardstick every GEMM figure is reported against (bench_gemm's peak_pct column).
// Each thread runs 12 independent chains of register-only FMAs (enough to cover the FMA
// latency on every x86 core of the last decade), so the rate is the FMA units' throughput.
// The bf16 sets probe the dot-product units the same way: AVX512_BF16 vdpbf16ps on 12 chains,
// AMX tdpbf16ps on 4 accumulator tiles; both take bf16 pairs and accumulate in float.
#include <cstdint>
#include <string>

namespace hddp::bench {

enum class Isa { Avx2, Avx512, Avx512Bf16, AmxBf16 };

const char* to_string(Isa isa);  // "avx2", "avx512", "avx512bf16", "amx-bf16"
bool is_bf16(Isa isa);           // bf16 inputs, float accumulators: no float/double choice
bool isa_supported(Isa isa);     // the CPU and OS can execute it (kernels' CPUID + XGETBV check;
                                 // AMX also needs Linux's permission, asked for here once)
// Why `isa` cannot run here, as the table prints it; "" when it can.
std::string isa_unsupported_reason(Isa isa);

// GFLOP/s (an FMA, or a bf16 product added to the accumulator, counts 2 flops) of `threads`
// OpenMP threads each running the probe for about `seconds`; 0 when the CPU lacks the
// instruction set, or for `dbl` with a bf16 set.
double fma_peak_gflops(Isa isa, bool dbl, int threads, double seconds = 0.2);

// The widest instruction set the CPU supports (AVX-512, else AVX2); the machine's peak.
Isa widest_isa();

}  // namespace hddp::bench
