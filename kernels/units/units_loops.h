#pragma once
// The register-only loops that measure each unit (units.h, bench_peak), one file per
// instruction set, each built with its flags: run `iters` iterations, return the flops done.
#include <cstdint>

namespace hddp::detail {

int64_t unit_loop_fma_avx2(bool dbl, int64_t iters);    // 12 FMA chains of 8 (4) lanes
int64_t unit_loop_fma_avx512(bool dbl, int64_t iters);  // 12 FMA chains of 16 (8) lanes
int64_t unit_loop_dpbf16_avx512(int64_t iters);         // 12 vdpbf16ps per iteration, 64 flops each
int64_t unit_loop_tdpbf16_amx(int64_t iters);           // 4 tdpbf16ps per iteration, 16 x 16 x 32 x 2 flops each

}  // namespace hddp::detail
