// HDDP_GEMM is read on the first gemm() call; an unknown value is an error, not a default.
// Its own executable: the backend is chosen once per process.
#include <gtest/gtest.h>

#include <cstdlib>

#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_backends.h>
#include <hddp/kernels/gemm/gemm_config.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

TEST(GemmEnv, UnknownBackendIsAnError) {
  ASSERT_EQ(0, setenv("HDDP_GEMM", "cublas", 1));
  float a = 1, b = 1, c = 0;
  try {
    hddp::gemm(hddp::Trans::No, hddp::Trans::No, 1, 1, 1, 1.f, &a, 1, &b, 1, 0.f, &c, 1);
    FAIL() << "gemm() accepted HDDP_GEMM=cublas";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("cublas"), std::string::npos) << e.what();
  }
  // After fixing the variable the next call succeeds with the named backend.
  ASSERT_EQ(0, setenv("HDDP_GEMM", "naive", 1));
  hddp::gemm(hddp::Trans::No, hddp::Trans::No, 1, 1, 1, 2.f, &a, 1, &b, 1, 0.f, &c, 1);
  EXPECT_EQ(c, 2.f);
  EXPECT_EQ(hddp::gemm_backend(), hddp::GemmBackend::Naive);
}

// HDDP_GEMM_KERNEL is read on the first blocked GEMM: an unknown name is an error, not a
// default; once it is unset (and no wisdom file is read) the built-in choice for this CPU runs.
TEST(GemmKernelEnv, UnknownKernelIsAnErrorThenTheWidestRuns) {
  using namespace hddp::detail;
  float a = 1, b = 1, c = 0;
  auto run = [&] {
    hddp::gemm_blocked<float>(hddp::Trans::No, hddp::Trans::No, 1, 1, 1, 3.f, &a, 1, &b, 1, 0.f, &c, 1);
  };
  ASSERT_EQ(0, setenv("HDDP_GEMM_KERNEL", "sse9", 1));
  try {
    run();
    FAIL() << "gemm_blocked accepted HDDP_GEMM_KERNEL=sse9";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos) << e.what();
  }
  // The reasons agree with the feature checks; portable runs anywhere.
  EXPECT_EQ(kernel_unsupported_reason("portable"), "");
  EXPECT_EQ(kernel_unsupported_reason("avx2").empty(), cpu_has_avx2_fma());
  EXPECT_EQ(kernel_unsupported_reason("avx512").empty(), cpu_has_avx512());
  EXPECT_EQ(kernels_by_name("avx512") != nullptr, cpu_has_avx512());
  if (cpu_has_avx512()) {
    EXPECT_TRUE(cpu_has_avx2_fma()) << "the AVX-512 set reuses the AVX2 packers";
  }
  EXPECT_THROW(kernel_unsupported_reason("AVX2"), std::invalid_argument);

  ASSERT_EQ(0, unsetenv("HDDP_GEMM_KERNEL"));
  ASSERT_EQ(0, setenv("HDDP_GEMM_WISDOM", "", 1));  // no wisdom file: the built-in choice
  run();
  EXPECT_EQ(c, 3.f);
  const GemmConfig want = make_gemm_config("", "", "", cpu_model_key(), cpu_model());
  EXPECT_STREQ(hddp::gemm_kernel_name(), want.set_s);
  EXPECT_EQ(hddp::gemm_config_description().find("from built-in"), hddp::gemm_config_description().find("from "))
      << hddp::gemm_config_description();
}
