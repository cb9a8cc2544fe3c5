// The probe's timing and threads (baseline x86-64; the loops are the library's, kernels/units/).
#include "peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/units/units_loops.h>

namespace hddp::bench {
namespace {

int64_t run_loop(Isa isa, bool dbl, int64_t iters) {
  switch (isa) {
    case Isa::Avx512: return hddp::detail::unit_loop_fma_avx512(dbl, iters);
    case Isa::Avx512Bf16: return hddp::detail::unit_loop_dpbf16_avx512(iters);
    case Isa::AmxBf16: return hddp::detail::unit_loop_tdpbf16_amx(iters);
    case Isa::Avx2: break;
  }
  return hddp::detail::unit_loop_fma_avx2(dbl, iters);
}

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

const char* to_string(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx512Bf16: return "avx512bf16";
    case Isa::AmxBf16: return "amx-bf16";
    case Isa::Avx2: break;
  }
  return "avx2";
}

bool is_bf16(Isa isa) { return isa == Isa::Avx512Bf16 || isa == Isa::AmxBf16; }

std::string isa_unsupported_reason(Isa isa) {
  switch (isa) {
    case Isa::Avx2: return hddp::detail::cpu_has_avx2_fma() ? "" : "not supported by this CPU";
    case Isa::Avx512: return hddp::detail::cpu_has_avx512() ? "" : "not supported by this CPU";
    case Isa::Avx512Bf16: return hddp::detail::cpu_has_avx512_bf16() ? "" : "not supported by this CPU";
    case Isa::AmxBf16: break;
  }
  if (!hddp::detail::cpu_has_amx_bf16()) return "not supported by this CPU (or its OS: no tile state in XCR0)";
  // No tile instruction before Linux granted the tile state.
  const std::string why = hddp::detail::amx_permission_error();
  return why.empty() ? "" : "not supported: " + why;
}

bool isa_supported(Isa isa) { return isa_unsupported_reason(isa).empty(); }

Isa widest_isa() { return isa_supported(Isa::Avx512) ? Isa::Avx512 : Isa::Avx2; }

double fma_peak_gflops(Isa isa, bool dbl, int threads, double seconds) {
  if (!isa_supported(isa) || (dbl && is_bf16(isa))) return 0;
  // Calibrate on one thread: iterations for about `seconds`, after a warm-up that lets the
  // core reach its vector clock.
  int64_t iters = 1 << 16;
  for (double t0 = now(); now() - t0 < seconds / 4;) run_loop(isa, dbl, iters);
  for (;;) {
    const double t0 = now();
    run_loop(isa, dbl, iters);
    const double dt = now() - t0;
    if (dt > seconds / 8) {
      iters = std::max<int64_t>(1, int64_t(double(iters) * seconds / dt));
      break;
    }
    iters *= 4;
  }
  // Every thread runs the same loop; the rate is the total over the slowest thread's time.
  int64_t flops = 0;
  const double t0 = now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
  flops += run_loop(isa, dbl, iters);
  return double(flops) / (now() - t0) * 1e-9;
}

}  // namespace hddp::bench
