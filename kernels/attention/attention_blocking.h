#pragma once
// The fused attention's blocking: queries and keys meet kBlock x kBlock at a time. 64 keeps a
// block's scores (16 KB in float), a transposed key block (D x 64) and a query block in L1 for
// head sizes up to 64, and makes the causal diagonal one block in T / 64.
#include <cstdint>

namespace hddp::detail {
inline constexpr int64_t kAttnBlock = 64;
}  // namespace hddp::detail
