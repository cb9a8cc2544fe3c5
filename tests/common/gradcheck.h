#pragma once
// Helpers of the layer suites (header-only): random vectors from hddp's RNG and gradients
// (one value, or a whole model's) against central finite differences in double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/rng.h>
#include "tests/common/mse.h"

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

// Every gradient of a model against central differences of its MSE loss on (X, Y), batch B;
// `stride` > 1 checks every stride-th parameter of layers with more than 1000. Returns the
// gradients (of one backward from zero).
inline std::vector<double> expect_model_gradient(Sequential<double>& m, std::vector<double> X,
                                                 const std::vector<double>& Y, int64_t B, int64_t stride = 1) {
  m.zero_grad();
  m.forward(X, B);
  hddp::testing::backward_mse(m, Y.data());
  const std::vector<double> g(m.grads(), m.grads() + m.num_params());
  auto loss = [&] {
    m.forward(X, B);
    return double(hddp::testing::mse_of(m, Y.data()));
  };
  for (const ParamView& v : m.param_views())
    for (int64_t k = 0; k < v.size(); k += (v.size() > 1000 ? stride : 1))
      expect_grad_near(g[size_t(v.offset + k)], central_diff(loss, m.params() + v.offset + k),
                       v.name + "[" + std::to_string(k) + "]");
  return g;
}

}  // namespace hddp::testing_util
