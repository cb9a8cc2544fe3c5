#pragma once
// MinMaxScaler with scikit-learn's semantics (sklearn.preprocessing.MinMaxScaler, clip=False),
// per feature (column) of row-major n x features data:
//   fit:        data_min, data_max over the rows; range = data_max - data_min;
//               range < 10 * DBL_EPSILON (a constant feature) is replaced by 1, as sklearn's
//               _handle_zeros_in_scale does, so nothing is divided by zero;
//               scale = (hi - lo) / range;  min = lo - data_min * scale
//   transform:  X * scale + min   (values of a constant feature c map to lo)
//   inverse:    (X - min) / scale
// where feature_range = (lo, hi), lo < hi. Parameters are kept in double whatever T is.
#include <cstdint>
#include <vector>

namespace hddp {

class MinMaxScaler {
 public:
  // Throws std::invalid_argument unless lo < hi (both finite).
  explicit MinMaxScaler(double lo = 0.0, double hi = 1.0);

  // Throws for n < 1, features < 1, a null X or a non-finite value (naming row and column).
  template <class T>
  void fit(const T* X, int64_t n, int64_t features);

  // out may alias X. Throw if not fitted or if features differs from the fit.
  template <class T>
  void transform(const T* X, int64_t n, int64_t features, T* out) const;
  template <class T>
  void inverse_transform(const T* X, int64_t n, int64_t features, T* out) const;

  bool fitted() const { return !scale_.empty(); }
  int64_t n_features() const { return int64_t(scale_.size()); }
  double range_min() const { return lo_; }
  double range_max() const { return hi_; }
  // sklearn's data_min_, data_max_, scale_, min_.
  const std::vector<double>& data_min() const { return data_min_; }
  const std::vector<double>& data_max() const { return data_max_; }
  const std::vector<double>& scale() const { return scale_; }
  const std::vector<double>& min() const { return min_; }

 private:
  void check_fitted(const char* fn, int64_t features) const;
  double lo_, hi_;
  std::vector<double> data_min_, data_max_, scale_, min_;
};

}  // namespace hddp
