#include "mnist_train/data.h"

#include <algorithm>

#include <hddp/core/idx.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace mnist {
namespace {

// DIR/NAME.gz, else DIR/NAME.
std::string find_file(const std::string& dir, const std::string& name) {
  for (const std::string& p : {dir + "/" + name + ".gz", dir + "/" + name})
    if (hddp::file_exists(p)) return p;
  HDDP_CHECK(hddp::file_exists(dir), "--data: no directory '" << dir << "'. Fashion-MNIST comes with the Debian package "
                          "dataset-fashion-mnist (apt-get install dataset-fashion-mnist: " << kDefaultData
                          << "), or give --data DIR holding the four IDX files");
  HDDP_CHECK(false, "--data: no '" << name << ".gz' or '" << name << "' in '" << dir << "' (the four IDX files of "
                    "Fashion-MNIST or MNIST: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-...)");
}

Split load_split(const std::string& dir, const std::string& prefix, int64_t limit) {
  const std::string ipath = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string lpath = find_file(dir, prefix + "-labels-idx1-ubyte");
  hddp::IdxArray im = hddp::read_idx(ipath), lb = hddp::read_idx(lpath);
  HDDP_CHECK(im.dims.size() == 3, ipath << ": images must have 3 dimensions (count, rows, columns), this file has "
                                        << im.dims.size());
  HDDP_CHECK(lb.dims.size() == 1, lpath << ": labels must have 1 dimension, this file has " << lb.dims.size());
  HDDP_CHECK(lb.dims[0] == im.dims[0], lpath << ": " << lb.dims[0] << " labels for the " << im.dims[0]
                                             << " images of " << ipath);
  Split s;
  s.count = limit > 0 ? std::min(limit, im.dims[0]) : im.dims[0];
  s.pixels = im.dims[1] * im.dims[2];
  im.data.resize(size_t(s.count * s.pixels));
  s.images = std::move(im.data);
  s.labels.resize(size_t(s.count));
  for (int64_t i = 0; i < s.count; ++i) {
    const int label = static_cast<unsigned char>(lb.data[size_t(i)]);
    HDDP_CHECK(label < kClasses, lpath << ": label " << label << " of image " << i << " is outside [0, " << kClasses << ")");
    s.labels[size_t(i)] = label;
  }
  return s;
}

}  // namespace

Dataset load(const std::string& dir, int64_t limit_train, int64_t limit_test) {
  Dataset d{load_split(dir, "train", limit_train), load_split(dir, "t10k", limit_test)};
  HDDP_CHECK(d.train.pixels == d.test.pixels, "--data '" << dir << "': training images have " << d.train.pixels
                                              << " pixels, test images " << d.test.pixels);
  return d;
}

void gather(const Split& s, const int64_t* idx, int64_t rows, float* x, int32_t* y) {
  const float inv = 1.0f / 255.0f;
  for (int64_t i = 0; i < rows; ++i) {
    const auto* src = reinterpret_cast<const uint8_t*>(s.images.data()) + idx[i] * s.pixels;
    float* dst = x + i * s.pixels;
    for (int64_t p = 0; p < s.pixels; ++p) dst[p] = float(src[p]) * inv;
    y[i] = s.labels[size_t(idx[i])];
  }
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, int rank, int size) {
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) perm[size_t(i)] = i;
  hddp::Rng rng(seed, uint64_t(epoch));  // stream `epoch` (>= 1; the weights use stream 0), the same on every rank
  for (int64_t i = n - 1; i > 0; --i) {             // Fisher-Yates
    const int64_t j = int64_t(rng.next_u64() % uint64_t(i + 1));
    std::swap(perm[size_t(i)], perm[size_t(j)]);
  }
  const int64_t per_rank = (n + size - 1) / size;
  std::vector<int64_t> mine(static_cast<size_t>(per_rank));
  for (int64_t k = 0; k < per_rank; ++k) mine[size_t(k)] = perm[size_t((rank + k * size) % n)];
  return mine;
}

}  // namespace mnist
