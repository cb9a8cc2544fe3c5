#pragma once
// Gradient buckets of the data-parallel reducer: a pure function of the parameter layout,
// identical on every rank (it depends on nothing else).
#include <cstdint>
#include <string>
#include <vector>

namespace hddp {

// One parameter tensor's place in the flat gradient arena, in elements. Parameters are given
// in forward layer order and tile the arena: offset[i] + size[i] == offset[i + 1].
struct ParamSlice {
  std::string name;
  int64_t offset = 0, size = 0;
};

// A contiguous range [begin, end) of the arena holding whole parameters `params` (indices
// into the layout, descending: the order their gradients become ready).
struct Bucket {
  int64_t begin = 0, end = 0;
  std::vector<int> params;
  int64_t size() const { return end - begin; }
};

// Buckets in reverse layer order (the last layer's gradients are ready first, so bucket 0
// covers the end of the arena), as PyTorch DDP: the first bucket is capped at
// first_cap_bytes, the others at cap_bytes. A parameter is never split between buckets: one
// larger than the cap gets a bucket of its own (splitting would let its first part start
// earlier, but costs an extra collective and complicates readiness - not worth it for the
// layer sizes hddp targets). Throws std::invalid_argument on a layout with gaps or overlaps,
// or caps <= 0.
std::vector<Bucket> assign_buckets(const std::vector<ParamSlice>& layout, int64_t elem_bytes,
                                   int64_t cap_bytes, int64_t first_cap_bytes);

}  // namespace hddp
