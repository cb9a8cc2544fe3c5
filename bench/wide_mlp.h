#pragma once
// The wide MLP of the benchmarks (bench_allreduce's step/wide, bench/at_scale): 1 -> 1024 x4
// (tanh) -> 1, 3.15 M parameters, 12.6 MB of float gradients.
#include <vector>

#include "core/model.h"

namespace hddp {

inline std::vector<LayerSpec> wide_mlp() {
  return {Linear(1, 1024),    Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1024), Tanh(),
          Linear(1024, 1024), Tanh(), Linear(1024, 1)};
}

}  // namespace hddp
