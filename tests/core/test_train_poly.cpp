// Single-process training of the tutorial: f(x) = (x^3 + (x-10)^4) / (x-20)^2 on [-3, 10],
// x and y MinMax-scaled to [-1, 1] (fitted on linspace(-3, 10, 32) and f of it), model
// Linear(1,20) -> Linear(20,1, no bias) -> tanh, 32 fresh uniform x per step from the seeded
// Rng, Adam lr 1e-3, 1000 steps; hddp must reach an MSE <= 0.01 on the scaled data.
//
// Which MSE: the loss of one 32-sample batch is noisy (PyTorch 1.13 on this exact setup, seeds
// 0-9: last-batch loss 0.002-0.010, and 0.0103 for seed 0), and the 32-point grid includes
// the end points where the target reaches +-1, which tanh cannot (PyTorch: 0.0092-0.0101).
// The assertion is on the expected training loss, estimated over 4096 fresh uniform samples
// (PyTorch, same loss over 1000 evenly spaced x: 0.0068-0.0074), and on the mean of the
// last 100 batch losses; the grid MSE is printed and bounded loosely.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/scaler.h>
#include "tests/common/mse.h"

using namespace hddp;

namespace {

double f(double x) { return (x * x * x + std::pow(x - 10, 4)) / ((x - 20) * (x - 20)); }

struct Result {
  double initial_mse, last100_mse, grid_mse, expected_mse;
};

Result train(uint64_t seed) {
  constexpr int kBatch = 32, kSteps = 1000;
  std::vector<float> grid_x(kBatch), grid_y(kBatch);
  for (int i = 0; i < kBatch; ++i) {
    grid_x[i] = float(-3.0 + 13.0 * i / (kBatch - 1));
    grid_y[i] = float(f(grid_x[i]));
  }
  MinMaxScaler sx(-1, 1), sy(-1, 1);
  sx.fit(grid_x.data(), kBatch, 1);
  sy.fit(grid_y.data(), kBatch, 1);
  std::vector<float> gx(kBatch), gy(kBatch);
  sx.transform(grid_x.data(), kBatch, 1, gx.data());
  sy.transform(grid_y.data(), kBatch, 1, gy.data());

  Rng rng(seed);
  Sequential<float> model({Linear(1, 20), Linear(20, 1, false), Tanh()}, kBatch, rng);
  Adam<float> adam(model.num_params(), {.lr = 1e-3});
  std::vector<float> x(kBatch), y(kBatch);
  Result r{};
  model.forward(gx, kBatch);
  r.initial_mse = hddp::testing::mse_of(model, gy.data());
  for (int step = 0; step < kSteps; ++step) {
    for (int i = 0; i < kBatch; ++i) {
      x[i] = rng.uniform(-3.0f, 10.0f);
      y[i] = float(f(x[i]));
    }
    sx.transform(x.data(), kBatch, 1, x.data());
    sy.transform(y.data(), kBatch, 1, y.data());
    model.zero_grad();
    model.forward(x, kBatch);
    const double loss = hddp::testing::mse_of(model, y.data());
    if (step >= kSteps - 100) r.last100_mse += loss / 100;
    hddp::testing::backward_mse(model, y.data());
    adam.step(model.arena());
  }
  model.forward(gx, kBatch);
  r.grid_mse = hddp::testing::mse_of(model, gy.data());
  // Expected loss: 128 batches of fresh samples from an independent stream.
  Rng eval(seed, 1);
  for (int b = 0; b < 128; ++b) {
    for (int i = 0; i < kBatch; ++i) {
      x[i] = eval.uniform(-3.0f, 10.0f);
      y[i] = float(f(x[i]));
    }
    sx.transform(x.data(), kBatch, 1, x.data());
    sy.transform(y.data(), kBatch, 1, y.data());
    model.forward(x, kBatch);
    r.expected_mse += hddp::testing::mse_of(model, y.data()) / 128;
  }
  return r;
}

TEST(TrainPoly, TutorialReachesPyTorchAccuracy) {
  for (uint64_t seed : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
    const Result r = train(seed);
    std::printf("seed %llu: MSE initial %.5f, mean of the last 100 batches %.5f, expected (4096 samples) %.5f, "
                "32-point grid %.5f\n",
                (unsigned long long)seed, r.initial_mse, r.last100_mse, r.expected_mse, r.grid_mse);
    EXPECT_LE(r.expected_mse, 0.01) << "seed " << seed;
    EXPECT_LE(r.last100_mse, 0.01) << "seed " << seed;
    EXPECT_LE(r.grid_mse, 0.0125) << "seed " << seed;
    EXPECT_LT(r.expected_mse, 0.1 * r.initial_mse) << "seed " << seed;  // it did learn
  }
}

TEST(TrainPoly, DeterministicForASeed) {
  const Result a = train(7), b = train(7);
  EXPECT_EQ(a.grid_mse, b.grid_mse);
  EXPECT_EQ(a.expected_mse, b.expected_mse);
}

}  // namespace
