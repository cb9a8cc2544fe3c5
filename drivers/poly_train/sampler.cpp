#include "poly_train/sampler.h"

namespace poly {

Sampler::Sampler(const Options& o, const Scalers& scale, int rank, int size)
    : function_(o.function),
      scale_(scale),
      rng_(o.seed, o.sampling == Sampling::Sharded ? 1 : 1 + uint64_t(rank)),
      shard_(o.sampling == Sampling::Sharded ? hddp::shard_of(o.batch_size * size, rank, size)
                                             : hddp::Shard{0, o.batch_size}),
      xg_(size_t(o.sampling == Sampling::Sharded ? o.batch_size * size : o.batch_size)),
      yg_(size_t(shard_.count)) {}

void Sampler::next(float* x, float* y) {
  const int64_t n = shard_.count, b = shard_.begin;
  for (double& v : xg_) v = rng_.uniform<double>(kXMin, kXMax);  // every rank draws the whole batch
  for (int64_t i = 0; i < n; ++i) yg_[i] = target(function_, xg_[b + i]);
  scale_.x.transform(xg_.data() + b, n, 1, xg_.data() + b);
  scale_.y.transform(yg_.data(), n, 1, yg_.data());
  for (int64_t i = 0; i < n; ++i) x[i] = float(xg_[b + i]), y[i] = float(yg_[i]);
}

}  // namespace poly
