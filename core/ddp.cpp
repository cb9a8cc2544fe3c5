#include "core/ddp.h"

#include "kernels/check.h"

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
  Reducer* r = reducer_.get();
  model_.set_backward_hook([r](size_t, int64_t ready_from) { r->grads_ready_from(ready_from); });
}

DistributedModel::~DistributedModel() { model_.set_backward_hook(nullptr); }

void DistributedModel::backward(const float* target) {
  reducer_->begin_step();
  model_.backward(target);
  reducer_->finish();
}

void DistributedModel::backward_from(const float* dY) {
  reducer_->begin_step();
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
