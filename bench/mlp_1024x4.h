#pragma once
// The MLP 1 -> 1024 x4 (tanh) -> 1 of bench_allreduce (its step/wide benchmarks) and
// bench/at_scale (model "wide"): 3.15 M parameters, 12.6 MB of float gradients. Not the scaling
// study's MLP (1-1024-1024-1024-1, bench_layers' step/wide), which its results also call "wide".
#include <vector>

#include <hddp/core/model.h>

namespace hddp {

inline std::vector<LayerSpec> mlp_1024x4() {
  return {Linear(1, 1024),    Tanh(), Linear(1024, 1024), Tanh(), Linear(1024, 1024), Tanh(),
          Linear(1024, 1024), Tanh(), Linear(1024, 1)};
}

}  // namespace hddp
