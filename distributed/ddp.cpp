#include "distributed/ddp.h"

#include "kernels/check.h"
#include "kernels/elementwise.h"

namespace hddp {

std::vector<ParamSlice> param_layout(const std::vector<ParamView>& views) {
  std::vector<ParamSlice> layout;
  layout.reserve(views.size());
  for (const ParamView& v : views) layout.push_back({v.name, v.offset, v.size()});
  return layout;
}

DistributedModel::DistributedModel(MPI_Comm comm, Sequential<float>& model, ReducerOptions options,
                                   Trace* trace)
    : model_(model) {
  reducer_ = std::make_unique<Reducer>(comm, model.params(), model.grads(), model.num_params(),
                                       param_layout(model.param_views()), options, trace);
  model_.set_backward_hook([this](size_t, int64_t from) { grads_ready_from(from); });
}

DistributedModel::~DistributedModel() { model_.set_backward_hook(nullptr); }

void DistributedModel::grads_ready_from(int64_t from) {
  if (check_finite_ && from < ready_from_) {
    if (non_finite_at_ < 0 && !all_finite(ready_from_ - from, model_.grads() + from)) non_finite_at_ = from;
    ready_from_ = from;
  }
  reducer_->grads_ready_from(from);  // launches the buckets that became ready
}

void DistributedModel::start_step() {
  ready_from_ = model_.num_params();
  non_finite_at_ = -1;
  reducer_->begin_step();
}

void DistributedModel::backward(const float* target) {
  start_step();
  model_.backward(target);
  reducer_->finish();
}

void DistributedModel::backward_from(const float* dY) {
  start_step();
  model_.backward_from(dY);
  reducer_->finish();
}

Shard shard_of(int64_t global, int rank, int size) {
  HDDP_CHECK_ARG(size > 0 && rank >= 0 && rank < size, "shard_of: rank " << rank << " of " << size);
  HDDP_CHECK_ARG(global >= 0, "shard_of: global batch must be >= 0, got " << global);
  const int64_t base = global / size, extra = global % size;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

}  // namespace hddp
