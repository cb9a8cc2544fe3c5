#pragma once
// The training batches: fresh uniform samples of x in [-3, 10] every epoch, scaled.
//   per-rank: each rank draws its own batch from stream (seed, 1 + rank);
//   sharded:  every rank draws one global batch of batch-size x P from stream (seed, 1) and
//             takes its contiguous slice (data/sampler.h shard_of), so the result does not
//             depend on P.
// The stream's state is part of a checkpoint (run_state.h).
#include <cstdint>
#include <vector>

#include <hddp/core/rng.h>
#include <hddp/data/sampler.h>
#include "poly_train/options.h"
#include "poly_train/problem.h"

namespace poly {

class Sampler {
 public:
  Sampler(const Options& o, const Scalers& scale, int rank, int size);

  // This rank's next batch, rows() rows: x scaled to [-1, 1], y = f(x) scaled.
  void next(float* x, float* y);
  int64_t rows() const { return shard_.count; }
  hddp::Rng& rng() { return rng_; }

 private:
  Function function_;
  const Scalers& scale_;
  hddp::Rng rng_;
  hddp::Shard shard_;
  std::vector<double> xg_, yg_;  // the global batch (per-rank: this rank's), this shard's y
};

}  // namespace poly
