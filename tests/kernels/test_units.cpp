// The units' measured rates and the bf16 unit (kernels/units.h): the choice rule on the rates of
// the CPUs it was made for, the probe against what CPUID reports, and HDDP_BF16_UNIT (ctest runs
// this once unset, once forced to float, once with a bad value).
#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <hddp/kernels/conv/conv_ukernel.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/units.h>

using namespace hddp;

namespace {

std::string forced() {
  const char* v = std::getenv("HDDP_BF16_UNIT");
  return v ? v : "";
}

// Per-core GFLOP/s as measured (bench/results: Zen 5, the Intel Xeon with AMX) and made up
// around the margin.
TEST(Units, TheRuleTakesTheFastestUnitPastTheMargin) {
  EXPECT_EQ(choose_bf16_unit({247, 455, 0}), Bf16Unit::Avx512Bf16);  // Zen 5: vdpbf16ps 1.84x
  EXPECT_EQ(choose_bf16_unit({226, 114, 2989}), Bf16Unit::Amx);      // Intel Xeon: AMX 13x, vdpbf16ps 0.5x
  EXPECT_EQ(choose_bf16_unit({226, 114, 0}), Bf16Unit::Float);       // Intel without AMX: float beats 0.5x
  EXPECT_EQ(choose_bf16_unit({200, 0, 0}), Bf16Unit::Float);         // Zen 3: no bf16 unit
  EXPECT_EQ(choose_bf16_unit({0, 0, 0}), Bf16Unit::Float);           // no vector unit measured
  EXPECT_EQ(choose_bf16_unit({100, 124, 0}), Bf16Unit::Float);       // under 1.25x
  EXPECT_EQ(choose_bf16_unit({100, 126, 0}), Bf16Unit::Avx512Bf16);
  EXPECT_EQ(choose_bf16_unit({100, 300, 200}), Bf16Unit::Avx512Bf16);  // the faster of the two
  EXPECT_STREQ(to_string(Bf16Unit::Amx), "amx");
  EXPECT_STREQ(to_string(Bf16Unit::Avx512Bf16), "avx512bf16");
  EXPECT_STREQ(to_string(Bf16Unit::Float), "float");
}

// A unit has a rate exactly where the CPU (and OS) runs it.
TEST(Units, TheProbeMeasuresWhatTheCpuHas) {
  const UnitRates r = measure_unit_rates(0.001);
  EXPECT_EQ(r.float_fma > 0, detail::cpu_has_avx2_fma());
  EXPECT_EQ(r.avx512bf16 > 0, detail::cpu_has_avx2_fma() && detail::cpu_has_avx512_bf16());
  const bool amx = detail::cpu_has_amx_bf16() && detail::amx_permission_error().empty();
  EXPECT_EQ(r.amx > 0, detail::cpu_has_avx2_fma() && amx);
  EXPECT_LT(r.float_fma, 1e4);  // GFLOP/s of one core, not flops
}

// Unset: the rule on this process's rates, and the GEMM's and the convolution's choices follow
// it. Forced: that unit (the GEMM's portable set for float). A bad value: an error naming the
// valid ones.
TEST(Units, TheChoiceIsTheRuleOrTheVariable) {
  const std::string v = forced();
  if (v == "fp8") {
    try {
      (void)bf16_unit();
      FAIL() << "HDDP_BF16_UNIT=fp8 was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("expected float, avx512bf16 or amx"), std::string::npos) << e.what();
    }
    return;
  }
  const Bf16Unit u = bf16_unit();
  if (v.empty()) {
    EXPECT_EQ(u, choose_bf16_unit(unit_rates()));
  } else {
    EXPECT_STREQ(to_string(u), v.c_str());
  }
  const char* gemm = u == Bf16Unit::Amx ? "amx" : u == Bf16Unit::Avx512Bf16 ? "avx512bf16" : "portable";
  if (!std::getenv("HDDP_GEMM_BF16_KERNEL")) {
    EXPECT_STREQ(gemm_bf16_kernel_name(), gemm);
  }
  const detail::ConvBf16Path p = detail::conv_bf16_path();
  const detail::ConvBf16Path want = u == Bf16Unit::Amx ? detail::ConvBf16Path::Amx
                                    : u == Bf16Unit::Float ? detail::ConvBf16Path::Float
                                                           : p;  // avx512bf16: its kernels only with the avx512 set
  EXPECT_EQ(p, want);
  const std::string report = bf16_unit_report();
  EXPECT_EQ(report.rfind(to_string(u), 0), 0u) << report;
  EXPECT_EQ(report.find("GFLOP/s") != std::string::npos, v.empty()) << report;
}

}  // namespace
