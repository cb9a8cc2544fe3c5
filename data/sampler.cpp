#include <hddp/data/sampler.h>

#include <algorithm>
#include <utility>

#include <hddp/core/rng.h>
#include <hddp/kernels/check.h>

namespace hddp {

DistributedSampler::DistributedSampler(int64_t n, uint64_t seed, int rank, int size, bool shuffle)
    : n_(n), seed_(seed), rank_(rank), size_(size), shuffle_(shuffle) {
  HDDP_CHECK_ARG(n >= 0, "DistributedSampler: n must be >= 0, got " << n);
  HDDP_CHECK_ARG(size > 0 && rank >= 0 && rank < size, "DistributedSampler: rank " << rank << " of " << size);
}

std::vector<int64_t> DistributedSampler::order(int64_t epoch) const {
  HDDP_CHECK_ARG(epoch >= 0, "DistributedSampler::order: epoch must be >= 0, got " << epoch);
  std::vector<int64_t> perm(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) perm[size_t(i)] = i;
  if (shuffle_) {
    Rng rng(seed_, uint64_t(epoch));     // the same stream on every rank
    for (int64_t i = n_ - 1; i > 0; --i) {  // Fisher-Yates
      const int64_t j = int64_t(rng.next_u64() % uint64_t(i + 1));
      std::swap(perm[size_t(i)], perm[size_t(j)]);
    }
  }
  // Position p of the padded order is perm[p % n]: the padding repeats the start.
  std::vector<int64_t> mine(static_cast<size_t>(per_rank()));
  for (int64_t k = 0; k < per_rank(); ++k) mine[size_t(k)] = perm[size_t((rank_ + k * size_) % n_)];
  return mine;
}

int64_t DistributedSampler::steps(int64_t batch) const {
  HDDP_CHECK_ARG(batch > 0, "DistributedSampler::steps: batch must be >= 1, got " << batch);
  return (per_rank() + batch - 1) / batch;
}

Shard shard_of(int64_t global, int rank, int size) {
  HDDP_CHECK_ARG(size > 0 && rank >= 0 && rank < size, "shard_of: rank " << rank << " of " << size);
  HDDP_CHECK_ARG(global >= 0, "shard_of: global batch must be >= 0, got " << global);
  const int64_t base = global / size, extra = global % size;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

}  // namespace hddp
