// HDDP_GEMM is read on the first gemm() call; an unknown value is an error, not a default.
// Its own executable: the backend is chosen once per process.
#include <gtest/gtest.h>

#include <cstdlib>

#include "kernels/gemm.h"

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
