#pragma once
// mnist_train's command line and model: the shared option groups (drivers/common/run_options.h)
// with this driver's defaults, its own options, the layers --model asks for, and what a
// resumed checkpoint must match.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/layer.h>
#include <hddp/core/model.h>
#include <hddp/data/dataset.h>
#include <hddp/data/idx.h>
#include "common/options.h"
#include "common/run_options.h"

namespace mnist {

constexpr int kClasses = 10;

struct Options : hddp::cli::TrainingOptions, hddp::cli::ParallelOptions, hddp::cli::CheckpointOptions {
  Options() { checkpoint_every = 1; }  // an epoch is long: a checkpoint after each (when --checkpoint)
  std::string data = hddp::kFashionMnistDir, out = "out-mnist", stats_json, export_path;
  int64_t limit_train = 0, limit_test = 0;
  std::string model = "mlp";
  std::vector<int64_t> hidden{256, 256};
  double dropout = 0;
  double target = 0.87;
  bool plot = true, help = false;
  hddp::cli::Inject inject_nan;  // --debug-inject-nan (tests)
};

void define_options(CLI::App& app, Options& o);

// The model for images of `shape` (C, H, W). The CNN's classifier takes the flattened size its
// two 2x2 pools leave (64 x 7 x 7 = 3136 for 28 x 28); images too small for them are refused by
// the layer that does not fit, naming it.
std::vector<hddp::LayerSpec> build_layers(const Options& o, const hddp::Shape& shape);

// What a checkpoint must match to be resumed (with the rank count): everything that decides the
// sequence of steps.
std::map<std::string, std::string> run_identity(const Options& o, const hddp::Sequential<float>& model,
                                                const hddp::Dataset& train, const hddp::Dataset& test);

}  // namespace mnist
