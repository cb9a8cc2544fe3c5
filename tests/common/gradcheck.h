#pragma once
// Helpers of the layer suites (header-only): random vectors from hddp's RNG and gradients
// against central finite differences in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/rng.h>

namespace hddp::testing_util {

// n values uniform in [lo, hi) from Rng(seed).
inline std::vector<double> randv(int64_t n, uint64_t seed, double lo = -1, double hi = 1) {
  Rng r(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = r.uniform(lo, hi);
  return v;
}

inline double dot(const std::vector<double>& a, const double* b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central difference of f at *x (x is restored).
template <class F>
double central_diff(F&& f, double* x, double h = 1e-6) {
  const double x0 = *x;
  *x = x0 + h;
  const double fp = f();
  *x = x0 - h;
  const double fm = f();
  *x = x0;
  return (fp - fm) / (2 * h);
}

inline void expect_grad_near(double analytic, double numeric, const std::string& what) {
  EXPECT_NEAR(analytic, numeric, 1e-7 * (1 + std::fabs(numeric))) << what;
}

}  // namespace hddp::testing_util
