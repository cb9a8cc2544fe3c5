#pragma once
// Dataset: samples held in memory, one row per sample. Features are floats, or bytes (images)
// scaled to floats when a batch is drawn; targets are float regression values or integer class
// labels. The readers (csv.h, npy.h, idx.h) fill one; gather() draws a batch of rows by index.
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/layer.h>

namespace hddp {

struct Dataset {
  int64_t count = 0;                 // samples
  Shape shape;                       // per-sample feature shape, e.g. {8} or {1, 28, 28}
  std::vector<float> x;              // count x features() floats, or empty when the features are bytes
  std::string x_bytes;               // count x features() bytes (images), or empty; scaled by byte_scale when drawn
  float byte_scale = 1.0f / 255.0f;  // torchvision's ToTensor
  int64_t target_width = 0;          // regression targets per sample (0 for class labels)
  std::vector<float> y;              // count x target_width
  std::vector<int32_t> labels;       // count class labels in [0, num_classes), or empty
  int num_classes = 0;
  std::vector<std::string> feature_names, target_names;  // from a CSV header; may be empty

  int64_t features() const { return numel(shape); }

  // Batch rows idx[0..rows): xb (rows x features()) gets the features (bytes times byte_scale),
  // yb the targets (rows x target_width) or lb the labels. Throws std::invalid_argument for an
  // index outside [0, count), for labels of a regression set or targets of a labelled set.
  void gather(const int64_t* idx, int64_t rows, float* xb, float* yb) const;
  void gather(const int64_t* idx, int64_t rows, float* xb, int32_t* lb) const;

  // The first n samples (n <= 0 or n >= count: all of them), a copy.
  Dataset head(int64_t n) const;
};

// Throws hddp::Error starting with `what` unless d is consistent: count >= 0, exactly one of x
// and x_bytes holding count x features() values (both empty when that is 0), y of count x
// target_width, labels empty or count values in [0, num_classes) with target_width 0, names
// empty or one per column.
void check(const Dataset& d, const std::string& what);

// Throws hddp::Error starting with `what` unless d's samples have the shape a model reads
// (model.input_shape()): called for every data set a model will read (training, test, a
// validation split) before any step, so that another set's images are refused, not read
// past (a 14 x 14 test set beside 28 x 28 training images).
void check_sample_shape(const Dataset& d, const Shape& model_input, const std::string& what);

// The class-count rule of a classifier: its outputs are the logits of `classes` classes, and
// every label of every set it reads is one of them. A reader sets num_classes to the largest
// label + 1, so a small test set may lack the last classes: that is fine; a label past the
// model's outputs is not. Throws hddp::Error starting with `what` (call it where the data are
// loaded, for each set, before any step) unless d holds labels and d.num_classes <= classes.
void check_class_count(const Dataset& d, int64_t classes, const std::string& what);

}  // namespace hddp
