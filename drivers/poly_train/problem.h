#pragma once
// The function to fit and the tutorial's data set.
#include <cstdint>
#include <string>
#include <vector>

namespace poly {

// f(x) = (x^3 + (x-10)^4) / (x-20)^2 ("poly", the tutorial's) or 1 + x^2/4000 - cos x
// ("griewank", the tutorial's alternative).
double target(const std::string& function, double x);

inline constexpr double kXMin = -3.0, kXMax = 10.0;  // the training range
inline constexpr int64_t kEvalPoints = 32;           // linspace(-3, 10, 32): scaler fit and evaluation

std::vector<double> linspace(double a, double b, int64_t n);

}  // namespace poly
