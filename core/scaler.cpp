#include <hddp/core/scaler.h>

#include <cfloat>
#include <cmath>

#include <hddp/kernels/check.h>

namespace hddp {

MinMaxScaler::MinMaxScaler(double lo, double hi) : lo_(lo), hi_(hi) {
  HDDP_CHECK_ARG(std::isfinite(lo) && std::isfinite(hi) && lo < hi,
                 "MinMaxScaler: feature_range (" << lo << ", " << hi << ") needs min < max");
}

template <class T>
void MinMaxScaler::fit(const T* X, int64_t n, int64_t features) {
  HDDP_CHECK_ARG(n > 0 && features > 0,
                 "MinMaxScaler::fit: need at least one row and one feature, got " << n << " x " << features);
  HDDP_CHECK_ARG(X, "MinMaxScaler::fit: X is null");
  const size_t nf = static_cast<size_t>(features);
  std::vector<double> mn(nf), mx(nf);
  for (int64_t j = 0; j < features; ++j) mn[j] = mx[j] = double(X[j]);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < features; ++j) {
      const double x = double(X[i * features + j]);
      HDDP_CHECK_ARG(std::isfinite(x), "MinMaxScaler::fit: X[" << i << ", " << j << "] = " << x << " is not finite");
      mn[j] = std::fmin(mn[j], x);
      mx[j] = std::fmax(mx[j], x);
    }
  std::vector<double> scale(nf), min(nf);
  for (int64_t j = 0; j < features; ++j) {
    double range = mx[j] - mn[j];
    if (range < 10 * DBL_EPSILON) range = 1.0;  // constant feature (sklearn _handle_zeros_in_scale)
    scale[j] = (hi_ - lo_) / range;
    min[j] = lo_ - mn[j] * scale[j];
  }
  data_min_ = std::move(mn), data_max_ = std::move(mx), scale_ = std::move(scale), min_ = std::move(min);
}

void MinMaxScaler::check_fitted(const char* fn, int64_t features) const {
  HDDP_CHECK_ARG(fitted(), "MinMaxScaler::" << fn << ": call fit() first");
  HDDP_CHECK_ARG(features == n_features(),
                 "MinMaxScaler::" << fn << ": fitted on " << n_features() << " features, got " << features);
}

template <class T>
void MinMaxScaler::transform(const T* X, int64_t n, int64_t features, T* out) const {
  check_fitted("transform", features);
  HDDP_CHECK_ARG(n >= 0, "MinMaxScaler::transform: negative row count " << n);
  HDDP_CHECK_ARG(n == 0 || (X && out), "MinMaxScaler::transform: null buffer");
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < features; ++j)
      out[i * features + j] = T(double(X[i * features + j]) * scale_[j] + min_[j]);
}

template <class T>
void MinMaxScaler::inverse_transform(const T* X, int64_t n, int64_t features, T* out) const {
  check_fitted("inverse_transform", features);
  HDDP_CHECK_ARG(n >= 0, "MinMaxScaler::inverse_transform: negative row count " << n);
  HDDP_CHECK_ARG(n == 0 || (X && out), "MinMaxScaler::inverse_transform: null buffer");
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < features; ++j)
      out[i * features + j] = T((double(X[i * features + j]) - min_[j]) / scale_[j]);
}

#define HDDP_INSTANTIATE_SCALER(T)                                                    \
  template void MinMaxScaler::fit<T>(const T*, int64_t, int64_t);                     \
  template void MinMaxScaler::transform<T>(const T*, int64_t, int64_t, T*) const;     \
  template void MinMaxScaler::inverse_transform<T>(const T*, int64_t, int64_t, T*) const;
HDDP_INSTANTIATE_SCALER(float)
HDDP_INSTANTIATE_SCALER(double)

}  // namespace hddp
