#include <hddp/distributed/ddp.h>

#include <algorithm>
#include <sstream>

#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {

std::vector<ParamSlice> param_layout(const std::vector<ParamView>& views) {
  std::vector<ParamSlice> layout;
  layout.reserve(views.size());
  for (const ParamView& v : views) layout.push_back({v.name, v.offset, v.size()});
  return layout;
}

namespace {

// FNV-1a over the layout: names and sizes.
uint64_t layout_hash(const std::vector<ParamSlice>& layout) {
  uint64_t h = fnv1a64(nullptr, 0);
  for (const ParamSlice& s : layout) {
    h = fnv1a64(s.name.data(), s.name.size(), h);
    h = fnv1a64(&s.size, sizeof s.size, h);
  }
  return h;
}

}  // namespace

void replicate(MPI_Comm comm, float* params, int64_t n, const std::vector<ParamSlice>& layout) {
  int size = 1;
  HDDP_MPI(MPI_Comm_size(comm, &size));
  // Same model on every rank? Gather (hash, count, elements) from all and compare with rank 0;
  // every rank sees the same table, so every rank throws the same message.
  const int64_t total = layout.empty() ? 0 : layout.back().offset + layout.back().size;
  int64_t sig[3] = {static_cast<int64_t>(layout_hash(layout)), static_cast<int64_t>(layout.size()), total};
  std::vector<int64_t> all(3 * size_t(size));
  HDDP_MPI(MPI_Allgather(sig, 3, MPI_INT64_T, all.data(), 3, MPI_INT64_T, comm));
  std::ostringstream diff;
  for (int r = 1; r < size; ++r)
    if (!std::equal(all.begin() + 3 * r, all.begin() + 3 * r + 3, all.begin()))
      diff << "; rank " << r << " has " << all[3 * r + 1] << " tensors / " << all[3 * r + 2] << " elements";
  HDDP_CHECK(diff.str().empty(), "the model differs between ranks: rank 0 has "
                                     << all[1] << " tensors / " << all[2] << " elements" << diff.str()
                                     << " (build the same model, with the same options, on every rank)");
  HDDP_CHECK_ARG(total == n, "replicate: layout covers " << total << " elements but the arena has " << n);
  mpi::bcast_chunked(params, n, MPI_FLOAT, 0, comm);  // every rank starts from rank 0's parameters
}

DistributedModel::DistributedModel(MPI_Comm comm, Module<float>& model, ReducerOptions options, Trace* trace)
    : model_(model) {
  ParamArena<float>& arena = model.arena();
  grads_ = arena.grads(), n_ = arena.size();
  const std::vector<ParamSlice> layout = param_layout(arena.views());
  replicate(comm, arena.params(), arena.size(), layout);
  reducer_ = std::make_unique<Reducer>(comm, arena.grads(), arena.size(), layout, options, trace);
  model_.set_backward_hook([this](size_t, int64_t from) { grads_ready_from(from); });
}

DistributedModel::~DistributedModel() { model_.set_backward_hook(nullptr); }

void DistributedModel::grads_ready_from(int64_t from) {
  if (check_finite_ && from < ready_from_) {
    if (non_finite_at_ < 0 && !all_finite(ready_from_ - from, grads_ + from)) non_finite_at_ = from;
    ready_from_ = from;
  }
  reducer_->grads_ready_from(from);  // launches the buckets that became ready
}

void DistributedModel::backward(const float* dY) {
  ready_from_ = n_;
  non_finite_at_ = -1;
  reducer_->begin_step();
  model_.backward(dY);  // calls grads_ready_from as its layers finish
  reducer_->finish();
}

}  // namespace hddp
