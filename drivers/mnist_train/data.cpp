#include "mnist_train/data.h"

#include <utility>

#include <hddp/data/sampler.h>
#include <hddp/kernels/check.h>

namespace mnist {
namespace {

Split load_split(const std::string& dir, const std::string& split, int64_t limit) {
  hddp::Dataset d = hddp::read_mnist(dir, split);
  Split s;
  static_cast<hddp::Dataset&>(s) = limit > 0 ? d.head(limit) : std::move(d);
  s.pixels = s.features();
  return s;
}

}  // namespace

Dataset load(const std::string& dir, int64_t limit_train, int64_t limit_test) {
  Dataset d{load_split(dir, "train", limit_train), load_split(dir, "test", limit_test)};
  HDDP_CHECK(d.train.pixels == d.test.pixels, "--data '" << dir << "': training images have " << d.train.pixels
                                              << " pixels, test images " << d.test.pixels);
  return d;
}

void gather(const Split& s, const int64_t* idx, int64_t rows, float* x, int32_t* y) { s.gather(idx, rows, x, y); }

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, int rank, int size) {
  return hddp::DistributedSampler(n, seed, rank, size).order(epoch);
}

}  // namespace mnist
