#include "poly_train/problem.h"

#include <cmath>

namespace poly {

const char* to_string(Function f) { return f == Function::Griewank ? "griewank" : "poly"; }

double target(Function f, double x) {
  if (f == Function::Griewank) return 1.0 + x * x / 4000.0 - std::cos(x);
  const double a = x - 10.0, b = x - 20.0;
  return (x * x * x + a * a * a * a) / (b * b);
}

std::vector<double> linspace(double a, double b, int64_t n) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = n == 1 ? a : a + (b - a) * double(i) / double(n - 1);
  return v;
}

Scalers fit_scalers(Function f) {
  const std::vector<double> xs = linspace(kXMin, kXMax, kEvalPoints);
  std::vector<double> fs(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) fs[i] = target(f, xs[i]);
  Scalers s;
  s.x.fit(xs.data(), int64_t(xs.size()), 1);
  s.y.fit(fs.data(), int64_t(fs.size()), 1);
  return s;
}

std::vector<hddp::LayerSpec> build_layers(const std::vector<int64_t>& hidden) {
  std::vector<hddp::LayerSpec> l{hddp::Linear(1, hidden[0])};
  for (size_t i = 1; i < hidden.size(); ++i) {
    l.push_back(hddp::Tanh());
    l.push_back(hddp::Linear(hidden[i - 1], hidden[i]));
  }
  l.push_back(hddp::Linear(hidden.back(), 1, false));
  l.push_back(hddp::Tanh());
  return l;
}

}  // namespace poly
