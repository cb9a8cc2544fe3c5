#pragma once
// The arithmetic units a product can run on, their rates measured on this CPU, and the unit the
// bf16 products take (gemm_bf16.h, conv.h's bf16 = true).
//
// The rates differ by CPU more than any table could keep up with: per core, AVX512_BF16's
// vdpbf16ps runs 1.84x the float FMA on AMD Zen 5 but 0.5x on Intel's Xeons, whose bf16
// throughput is in the AMX tile unit instead (13x the float FMA on a Sapphire-Rapids-class
// core). So the unit is chosen by measurement: on first use each unit the CPU has runs a
// register-only loop (a few milliseconds in all, best of five short rounds each), and bf16
// products take the fastest unit that runs at least kBf16UnitMargin times the float FMA; on
// none of them (Zen 3, or Intel without AMX) a model's bf16 products run in float (core's
// Precision::Bf16, conv.h): rounding would only cost time. gemm_bf16 itself, called directly,
// always rounds (its portable set there). The ratios seen are 0.5, 1.84 and 13: far from the
// margin, so the choice does not flip between runs on one CPU.
//
// HDDP_BF16_UNIT=float|avx512bf16|amx forces the choice (a unit this CPU lacks is an error that
// says so). HDDP_GEMM_BF16_KERNEL still forces the bf16 GEMM's own set.
#include <string>

namespace hddp {

enum class Bf16Unit { Float, Avx512Bf16, Amx };
const char* to_string(Bf16Unit u);  // "float", "avx512bf16", "amx"

inline constexpr double kBf16UnitMargin = 1.25;

// GFLOP/s on one core (a product and its add: 2 flops); 0 where this CPU (or its OS) lacks the
// unit. float_fma: the widest float FMA (AVX-512, else AVX2+FMA).
struct UnitRates {
  double float_fma = 0, avx512bf16 = 0, amx = 0;
};
// Measured on the calling thread, each unit for about `seconds` in five rounds (the best kept).
UnitRates measure_unit_rates(double seconds = 0.002);
// measure_unit_rates() once per process (thread-safe).
const UnitRates& unit_rates();

// The rule on given rates: the fastest bf16 unit at >= kBf16UnitMargin x float_fma, else Float.
Bf16Unit choose_bf16_unit(const UnitRates& r);

// The unit bf16 products run on here: HDDP_BF16_UNIT where set (throws std::invalid_argument
// naming the valid values, or why this CPU cannot), else the rule above. Once per process.
Bf16Unit bf16_unit();
// One line for logs and --help: the unit and why, e.g.
// "amx (measured per core: float FMA 226, avx512bf16 114, amx 2989 GFLOP/s)".
std::string bf16_unit_report();

}  // namespace hddp
