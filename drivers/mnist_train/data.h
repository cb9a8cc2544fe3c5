#pragma once
// Fashion-MNIST (or MNIST) for mnist_train, over hddp::data (data/idx.h, data/sampler.h): the
// two splits as bytes, 60,000 + 10,000 images of 28 x 28 and their labels, 55 MB per rank; a
// batch is turned into floats (x / 255, torchvision's ToTensor) when it is drawn. And the
// per-epoch order every rank agrees on: PyTorch's DistributedSampler (shuffle, padded to a
// multiple of the ranks, rank r takes every P-th).
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/data/dataset.h>
#include <hddp/data/idx.h>

namespace mnist {

inline constexpr const char* kDefaultData = hddp::kFashionMnistDir;
inline constexpr int kClasses = 10;

// One split: shape {1, rows, columns}, the images as bytes, labels in [0, kClasses).
struct Split : hddp::Dataset {
  int64_t pixels = 0;  // per image: features()
};

struct Dataset {
  Split train, test;
};

// hddp::read_mnist of both splits (its messages: a missing file with the Debian package to
// install, malformed files, a label outside [0, 10)), and train and test images of different
// sizes. limit_train / limit_test > 0 keep only the first that many of each split (tests,
// quick runs).
Dataset load(const std::string& dir, int64_t limit_train = 0, int64_t limit_test = 0);

// Batch rows as floats: x[i * pixels + p] = images[idx[i]][p] / 255, y[i] = labels[idx[i]].
void gather(const Split& s, const int64_t* idx, int64_t rows, float* x, int32_t* y);

// This rank's sample order for one epoch: hddp::DistributedSampler(n, seed, rank, size).order(epoch).
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, int rank, int size);

}  // namespace mnist
