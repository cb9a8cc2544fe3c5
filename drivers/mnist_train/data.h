#pragma once
// Fashion-MNIST (or MNIST) as IDX files, kept as bytes: 60,000 + 10,000 images of 28 x 28 and
// their labels, 55 MB per rank; a batch is turned into floats (x / 255, torchvision's
// ToTensor) when it is drawn. And the per-epoch order every rank agrees on: PyTorch's
// DistributedSampler (shuffle, padded to a multiple of the ranks, rank r takes every P-th).
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/rng.h>

namespace mnist {

inline constexpr const char* kDefaultData = "/usr/share/datasets/fashion-mnist";
inline constexpr int kClasses = 10;

struct Split {
  int64_t count = 0, pixels = 0;  // images, pixels per image
  std::string images;              // count x pixels bytes (the file's buffer, not copied)
  std::vector<int32_t> labels;     // count values in [0, kClasses)
};

struct Dataset {
  Split train, test;
};

// Reads DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (the gzip'd name first). Throws
// hddp::Error naming the file and the problem: missing (with the Debian package to install),
// malformed (core/idx.h), images that are not 3-dimensional, a label count that differs from the
// image count, a label outside [0, 10), train and test images of different sizes.
// limit_train / limit_test > 0 keep only the first that many of each split (tests, quick runs).
Dataset load(const std::string& dir, int64_t limit_train = 0, int64_t limit_test = 0);

// Batch rows as floats: x[i * pixels + p] = images[idx[i]][p] / 255, y[i] = labels[idx[i]].
void gather(const Split& s, const int64_t* idx, int64_t rows, float* x, int32_t* y);

// This rank's sample order for one epoch, PyTorch's DistributedSampler(shuffle=True,
// drop_last=False): a permutation of [0, n) seeded by (seed, epoch), the same on every rank,
// padded by repeating its start to a multiple of `size`; rank `rank` takes positions rank,
// rank + size, ... Every rank gets ceil(n / size) indices.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, int rank, int size);

}  // namespace mnist
