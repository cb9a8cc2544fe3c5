#pragma once
// Data-parallel glue: a model whose backward feeds a Reducer. The sharding of a global batch
// over ranks (shard_of) is in data/sampler.h.
#include <mpi.h>

#include <memory>

#include <hddp/core/model.h>
#include <hddp/distributed/reducer.h>

namespace hddp {

// The model's parameter views as the reducer's layout.
std::vector<ParamSlice> param_layout(const std::vector<ParamView>& views);

// Replica set-up (collective on comm): checks that every rank has the same parameter layout
// (names, sizes, count; a mismatch throws the same message on every rank), then broadcasts
// rank 0's n parameters, so every replica starts from the same point.
void replicate(MPI_Comm comm, float* params, int64_t n, const std::vector<ParamSlice>& layout);

// Wraps a model (which must outlive it): construction replicates it (replicate(): the same
// model on every rank, rank 0's parameters everywhere), then builds its Reducer over the
// model's gradient arena and takes the model's backward hook. backward(dY) then runs the
// model's backward with its gradient buckets reduced as they complete, and returns with the
// gradients averaged over the ranks. Any Module works (core/model.h).
//
//   DistributedModel ddp(env.comm(), model, options);
//   model.zero_grad();
//   xent.forward(model.forward(x, rows), labels, rows);
//   ddp.backward(xent.grad());     // model.backward + the allreduce of every bucket
class DistributedModel {
 public:
  DistributedModel(MPI_Comm comm, Module<float>& model, ReducerOptions options = {}, Trace* trace = nullptr);
  ~DistributedModel();
  DistributedModel(const DistributedModel&) = delete;  // the backward hook holds `this`
  DistributedModel& operator=(const DistributedModel&) = delete;
  // The model's backward from dLoss/dOutput (a loss's grad(), core/loss.h), then the
  // reduction: on return every rank holds the same averaged gradients.
  void backward(const float* dY);
  Module<float>& module() { return model_; }
  Reducer& reducer() { return *reducer_; }
  // Gradient accumulation (PyTorch DDP's no_sync): while on, backward only adds this rank's
  // gradients into the arena, with no communication; the first backward with it off reduces
  // the accumulated sum (call zero_grad only before the first of the accumulated passes).
  void set_no_sync(bool on) { reducer_->set_no_sync(on); }
  // A diagnostic, off by default: each layer's own gradients (local, not yet averaged) checked
  // for NaN/Inf as backward hands them to the reducer, before their bucket is launched (one
  // more read of the gradients per step). non_finite_at(): the arena offset of the first
  // non-finite gradient of the last backward (in the layer backward reached first), or -1;
  // view_containing() names its parameter. Without it, the training loop's one pass over the
  // averaged gradients (train/stop_guard.h) still finds every NaN/Inf, without naming the rank.
  void set_check_finite(bool on) { check_finite_ = on; }
  int64_t non_finite_at() const { return non_finite_at_; }

 private:
  void grads_ready_from(int64_t from);  // the model's backward hook

  Module<float>& model_;
  float* grads_;                   // the arena's gradients (read without arena(), which would
  int64_t n_;                      // clear a Sequential's pending zero_grad)
  std::unique_ptr<Reducer> reducer_;
  bool check_finite_ = false;
  int64_t ready_from_ = 0;      // grads [ready_from_, num_params) are final in this backward
  int64_t non_finite_at_ = -1;
};

}  // namespace hddp
