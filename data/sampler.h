#pragma once
// The sample order of data-parallel training, and the split of one global batch over ranks.
//
// DistributedSampler is PyTorch's DistributedSampler(drop_last=False): every epoch the indices
// [0, n) in one order all ranks agree on - shuffled by a permutation seeded by (seed, epoch), or
// 0..n-1 - padded by repeating its start to a multiple of `size`; rank r takes the positions
// r, r + size, r + 2 size, ... so every rank gets ceil(n / size) indices. The result depends
// only on (n, seed, epoch, rank, size): not on threads or on where the ranks run.
#include <cstdint>
#include <vector>

namespace hddp {

class DistributedSampler {
 public:
  // Throws std::invalid_argument for n < 0, size < 1 or rank outside [0, size).
  DistributedSampler(int64_t n, uint64_t seed, int rank, int size, bool shuffle = true);

  // This rank's indices for `epoch` (>= 0), per_rank() of them. Shuffled: a Fisher-Yates
  // permutation drawn from Rng(seed, epoch) (stream `epoch`; stream 0 is usually the weights',
  // so count epochs from 1).
  std::vector<int64_t> order(int64_t epoch) const;
  int64_t per_rank() const { return (n_ + size_ - 1) / size_; }  // ceil(n / size)
  int64_t steps(int64_t batch) const;                             // ceil(per_rank() / batch), batch >= 1

 private:
  int64_t n_;
  uint64_t seed_;
  int rank_, size_;
  bool shuffle_;
};

// Rows [begin, begin + count) of a global batch of `global` rows that rank `rank` of `size`
// takes: contiguous shards whose sizes differ by at most one (the first global % size ranks
// take one more). Averaging gradients over ranks equals the global mean only when every shard
// has the same size, i.e. when size divides global. Throws std::invalid_argument for a rank
// outside [0, size) or global < 0.
struct Shard {
  int64_t begin = 0, count = 0;
};
Shard shard_of(int64_t global, int rank, int size);

}  // namespace hddp
