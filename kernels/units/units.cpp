// The units' rates and the bf16 unit (units.h).
#include <hddp/kernels/units.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/units/units_loops.h>

namespace hddp {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// GFLOP/s of `loop` over about `seconds` (iterations calibrated from a first short run).
template <class F>
double rate(F loop, double seconds) {
  int64_t iters = 256;
  double t0 = now();
  int64_t flops = loop(iters);
  double dt = now() - t0;
  iters = std::max<int64_t>(1, int64_t(double(iters) * seconds / std::max(dt, 1e-7)));
  t0 = now();
  flops = loop(iters);
  dt = now() - t0;
  return double(flops) / std::max(dt, 1e-9) * 1e-9;
}

bool has_amx() { return detail::cpu_has_amx_bf16() && detail::amx_permission_error().empty(); }

}  // namespace

const char* to_string(Bf16Unit u) {
  switch (u) {
    case Bf16Unit::Avx512Bf16: return "avx512bf16";
    case Bf16Unit::Amx: return "amx";
    case Bf16Unit::Float: break;
  }
  return "float";
}

UnitRates measure_unit_rates(double seconds) {
  const bool avx512 = detail::cpu_has_avx512(), avx2 = detail::cpu_has_avx2_fma();
  const bool dp = detail::cpu_has_avx512_bf16(), amx = has_amx();
  auto fma = [&](int64_t n) { return avx512 ? detail::unit_loop_fma_avx512(false, n) : detail::unit_loop_fma_avx2(false, n); };
  UnitRates best;
  if (!avx2) return best;  // no vector unit the kernels use: every rate 0, bf16 on float
  rate(fma, 4 * seconds);  // the core reaches its vector clock
  for (int round = 0; round < 5; ++round) {  // interleaved: a slow moment costs every unit alike
    best.float_fma = std::max(best.float_fma, rate(fma, seconds));
    if (dp) best.avx512bf16 = std::max(best.avx512bf16, rate(detail::unit_loop_dpbf16_avx512, seconds));
    if (amx) best.amx = std::max(best.amx, rate(detail::unit_loop_tdpbf16_amx, seconds));
  }
  return best;
}

const UnitRates& unit_rates() {
  static const UnitRates r = measure_unit_rates();
  return r;
}

namespace {

Bf16Unit forced_unit(const std::string& v) {
  if (v == "float") return Bf16Unit::Float;
  if (v == "avx512bf16") {
    if (!detail::cpu_has_avx512_bf16())
      throw std::invalid_argument("HDDP_BF16_UNIT=avx512bf16: this CPU has no AVX512_BF16; unset it or use float");
    return Bf16Unit::Avx512Bf16;
  }
  if (v == "amx") {
    if (!detail::cpu_has_amx_bf16())
      throw std::invalid_argument("HDDP_BF16_UNIT=amx: this CPU (or its OS) has no AMX-BF16; unset it or use float");
    const std::string why = detail::amx_permission_error();
    if (!why.empty()) throw std::invalid_argument("HDDP_BF16_UNIT=amx: " + why + "; unset it or use float");
    return Bf16Unit::Amx;
  }
  throw std::invalid_argument("HDDP_BF16_UNIT='" + v + "': expected float, avx512bf16 or amx (or unset it: the "
                              "fastest unit measured on this CPU)");
}

std::string forced_value() {
  const char* v = std::getenv("HDDP_BF16_UNIT");
  return v ? v : "";
}

}  // namespace

Bf16Unit choose_bf16_unit(const UnitRates& r) {
  Bf16Unit u = Bf16Unit::Float;
  double best = kBf16UnitMargin * r.float_fma;
  if (r.avx512bf16 >= best && r.avx512bf16 > 0) u = Bf16Unit::Avx512Bf16, best = r.avx512bf16;
  if (r.amx >= best && r.amx > 0) u = Bf16Unit::Amx;
  return u;
}

Bf16Unit bf16_unit() {
  static const Bf16Unit u = forced_value().empty() ? choose_bf16_unit(unit_rates()) : forced_unit(forced_value());
  return u;
}

std::string bf16_unit_report() {
  const Bf16Unit u = bf16_unit();
  if (!forced_value().empty()) return std::string(to_string(u)) + " (HDDP_BF16_UNIT)";
  const UnitRates& r = unit_rates();
  char buf[192];
  std::snprintf(buf, sizeof buf, "%s (measured per core: float FMA %.0f, avx512bf16 %.0f, amx %.0f GFLOP/s; a bf16 "
                "unit needs %.2fx float)", to_string(u), r.float_fma, r.avx512bf16, r.amx, kBf16UnitMargin);
  return buf;
}

}  // namespace hddp
