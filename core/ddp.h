#pragma once
// Data-parallel glue: a Sequential model whose backward feeds a Reducer, and the sharding of
// a global batch over ranks.
#include <mpi.h>

#include <memory>

#include "core/model.h"
#include "core/reducer.h"

namespace hddp {

// The model's parameter views as the reducer's layout.
std::vector<ParamSlice> param_layout(const std::vector<ParamView>& views);

// Wraps a model (which must outlive it): construction checks the model is the same on every
// rank and broadcasts rank 0's parameters; backward() runs the model's backward with its
// gradient buckets reduced as they complete, and returns with gradients averaged over ranks.
class DistributedModel {
 public:
  DistributedModel(MPI_Comm comm, Sequential<float>& model, ReducerOptions options = {},
                   Trace* trace = nullptr);
  ~DistributedModel();

  void backward(const float* target);      // MSE loss backward + reduction
  void backward_from(const float* dY);     // other losses
  Sequential<float>& model() { return model_; }
  Reducer& reducer() { return *reducer_; }

 private:
  Sequential<float>& model_;
  std::unique_ptr<Reducer> reducer_;
};

// Rows [begin, begin + count) of a global batch of `global` rows that rank `rank` of `size`
// takes: contiguous shards whose sizes differ by at most one (the first global % size ranks
// take one more). Averaging gradients over ranks equals the global mean only when every shard
// has the same size, i.e. when size divides global.
struct Shard {
  int64_t begin = 0, count = 0;
};
Shard shard_of(int64_t global, int rank, int size);

}  // namespace hddp
