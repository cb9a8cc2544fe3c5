#include <hddp/distributed/buckets.h>

#include <hddp/kernels/check.h>

namespace hddp {

std::vector<Bucket> assign_buckets(const std::vector<ParamSlice>& layout, int64_t elem_bytes,
                                   int64_t cap_bytes, int64_t first_cap_bytes) {
  HDDP_CHECK_ARG(elem_bytes > 0, "assign_buckets: elem_bytes must be > 0, got " << elem_bytes);
  HDDP_CHECK_ARG(cap_bytes > 0, "assign_buckets: bucket cap must be > 0 bytes, got " << cap_bytes);
  HDDP_CHECK_ARG(first_cap_bytes > 0,
                 "assign_buckets: first bucket cap must be > 0 bytes, got " << first_cap_bytes);
  for (size_t i = 0; i < layout.size(); ++i) {
    HDDP_CHECK_ARG(layout[i].size >= 0, "assign_buckets: parameter '" << layout[i].name << "' has negative size");
    const int64_t expect = i == 0 ? 0 : layout[i - 1].offset + layout[i - 1].size;
    HDDP_CHECK_ARG(layout[i].offset == expect, "assign_buckets: parameter '"
                                                   << layout[i].name << "' starts at " << layout[i].offset
                                                   << ", expected " << expect << " (layout must tile the arena)");
  }
  std::vector<Bucket> buckets;
  Bucket cur;
  int64_t cap = first_cap_bytes;
  for (int i = static_cast<int>(layout.size()) - 1; i >= 0; --i) {
    const ParamSlice& p = layout[i];
    if (!cur.params.empty() && (cur.size() + p.size) * elem_bytes > cap) {
      buckets.push_back(cur);
      cur = Bucket{};
      cap = cap_bytes;
    }
    if (cur.params.empty()) cur.end = p.offset + p.size;
    cur.begin = p.offset;
    cur.params.push_back(i);
  }
  if (!cur.params.empty()) buckets.push_back(cur);
  return buckets;
}

}  // namespace hddp
