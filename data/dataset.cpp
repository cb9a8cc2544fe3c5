#include <hddp/data/dataset.h>

#include <algorithm>

#include <hddp/kernels/check.h>

namespace hddp {
namespace {

// The features of rows idx[0..rows) into xb, checking each index.
void gather_x(const Dataset& d, const int64_t* idx, int64_t rows, float* xb) {
  const int64_t f = d.features();
  const auto* bytes = reinterpret_cast<const uint8_t*>(d.x_bytes.data());
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t r = idx[i];
    HDDP_CHECK_ARG(r >= 0 && r < d.count, "Dataset::gather: index " << r << " (row " << i << " of the batch) is outside [0, "
                                                                      << d.count << ")");
    float* dst = xb + i * f;
    if (!d.x_bytes.empty()) {
      const uint8_t* src = bytes + r * f;
      for (int64_t k = 0; k < f; ++k) dst[k] = float(src[k]) * d.byte_scale;
    } else {
      std::copy_n(d.x.data() + r * f, f, dst);
    }
  }
}

}  // namespace

void Dataset::gather(const int64_t* idx, int64_t rows, float* xb, float* yb) const {
  HDDP_CHECK_ARG(labels.empty(), "Dataset::gather: this set has class labels, not regression targets (pass int32_t* for them)");
  gather_x(*this, idx, rows, xb);
  for (int64_t i = 0; i < rows; ++i)
    std::copy_n(y.data() + idx[i] * target_width, target_width, yb + i * target_width);
}

void Dataset::gather(const int64_t* idx, int64_t rows, float* xb, int32_t* lb) const {
  HDDP_CHECK_ARG(labels.size() == size_t(count),
                 "Dataset::gather: this set has " << target_width << " regression targets per sample, not class labels "
                                                  "(pass float* for them)");
  gather_x(*this, idx, rows, xb);
  for (int64_t i = 0; i < rows; ++i) lb[i] = labels[size_t(idx[i])];
}

Dataset Dataset::head(int64_t n) const {
  if (n <= 0 || n >= count) return *this;
  Dataset d = *this;
  d.count = n;
  const size_t f = size_t(features());
  if (!x.empty()) d.x.assign(x.begin(), x.begin() + ptrdiff_t(size_t(n) * f));
  if (!x_bytes.empty()) d.x_bytes.assign(x_bytes, 0, size_t(n) * f);
  d.y.assign(y.begin(), y.begin() + ptrdiff_t(size_t(n * target_width)));
  if (!labels.empty()) d.labels.assign(labels.begin(), labels.begin() + n);
  return d;
}

void check(const Dataset& d, const std::string& what) {
  HDDP_CHECK(d.count >= 0, what << ": count " << d.count << " < 0");
  for (int64_t s : d.shape) HDDP_CHECK(s >= 0, what << ": sample shape " << to_string(d.shape) << " has a negative size");
  const uint64_t values = uint64_t(d.count) * uint64_t(d.features());
  const bool in_x = d.x.size() == values && d.x_bytes.empty(), in_bytes = d.x_bytes.size() == values && d.x.empty();
  HDDP_CHECK(in_x || in_bytes, what << ": " << d.count << " samples of shape " << to_string(d.shape) << " need " << values
                                    << " features, as floats or as bytes; there are " << d.x.size() << " floats and "
                                    << d.x_bytes.size() << " bytes");
  HDDP_CHECK(d.target_width >= 0, what << ": target_width " << d.target_width << " < 0");
  HDDP_CHECK(d.y.size() == uint64_t(d.count) * uint64_t(d.target_width),
             what << ": " << d.y.size() << " targets for " << d.count << " samples of " << d.target_width);
  if (!d.labels.empty()) {
    HDDP_CHECK(d.target_width == 0, what << ": both class labels and " << d.target_width << " regression targets");
    HDDP_CHECK(d.labels.size() == size_t(d.count), what << ": " << d.labels.size() << " labels for " << d.count << " samples");
    for (size_t i = 0; i < d.labels.size(); ++i)
      HDDP_CHECK(d.labels[i] >= 0 && d.labels[i] < d.num_classes,
                 what << ": label " << d.labels[i] << " of sample " << i << " is outside [0, " << d.num_classes << ")");
  }
  HDDP_CHECK(d.feature_names.empty() || int64_t(d.feature_names.size()) == d.features(),
             what << ": " << d.feature_names.size() << " feature names for " << d.features() << " features");
  const size_t targets = d.labels.empty() ? size_t(d.target_width) : 1;
  HDDP_CHECK(d.target_names.empty() || d.target_names.size() == targets,
             what << ": " << d.target_names.size() << " target names for " << targets << " target columns");
}

void check_sample_shape(const Dataset& d, const Shape& model_input, const std::string& what) {
  HDDP_CHECK(d.shape == model_input, what << ": samples of shape " << to_string(d.shape) << " (" << d.features()
                                          << " values), but the model reads " << to_string(model_input) << " ("
                                          << numel(model_input) << " values)");
}

void check_class_count(const Dataset& d, int64_t classes, const std::string& what) {
  HDDP_CHECK(!d.labels.empty() || d.count == 0, what << ": no class labels (regression targets), but the model is a classifier of "
                                                     << classes << " classes");
  HDDP_CHECK(d.num_classes <= classes, what << ": labels up to " << d.num_classes - 1 << ", but the model has " << classes
                                            << " outputs (classes 0 to " << classes - 1
                                            << "): build its last layer with as many outputs as the training set has classes");
}

}  // namespace hddp
