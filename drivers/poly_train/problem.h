#pragma once
// The function to fit and the tutorial's data set.
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/scaler.h>

namespace poly {

// f(x) = (x^3 + (x-10)^4) / (x-20)^2 ("poly", the tutorial's) or 1 + x^2/4000 - cos x
// ("griewank", the tutorial's alternative).
enum class Function { Poly, Griewank };
const char* to_string(Function f);  // "poly" | "griewank"
double target(Function f, double x);

inline constexpr double kXMin = -3.0, kXMax = 10.0;  // the training range
inline constexpr int64_t kEvalPoints = 32;           // linspace(-3, 10, 32): scaler fit and evaluation

std::vector<double> linspace(double a, double b, int64_t n);

// The tutorial's scaling: MinMax to [-1, 1], x fitted on linspace(-3, 10, 32), y on f there.
struct Scalers {
  hddp::MinMaxScaler x{-1, 1}, y{-1, 1};
};
Scalers fit_scalers(Function f);

// The tutorial's model: Linear(1, 20) -> Linear(20, 1, bias=False) -> tanh (hidden = {20});
// with more hidden widths, tanh between the hidden layers.
std::vector<hddp::LayerSpec> build_layers(const std::vector<int64_t>& hidden);

}  // namespace poly
