#include "poly_train/problem.h"

#include <cmath>

namespace poly {

double target(const std::string& function, double x) {
  if (function == "griewank") return 1.0 + x * x / 4000.0 - std::cos(x);
  const double a = x - 10.0, b = x - 20.0;
  return (x * x * x + a * a * a * a) / (b * b);
}

std::vector<double> linspace(double a, double b, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = n == 1 ? a : a + (b - a) * double(i) / double(n - 1);
  return v;
}

}  // namespace poly
