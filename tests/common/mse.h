#pragma once
// The MSE loss of a model's last forward, for tests that train or differentiate with it:
// mse_of(m, target) is MseLoss's value, backward_mse(m, target) the model's backward from its
// gradient (through a DistributedModel when given one).
#include <vector>

#include <hddp/core/layers.h>
#include <hddp/core/model.h>

namespace hddp::testing {

template <class T>
T mse_of(const Sequential<T>& m, const T* target) {
  return mse_forward(m.batch() * m.out_features(), m.output(), target);
}

template <class T>
std::vector<T> mse_grad(const Sequential<T>& m, const T* target) {
  std::vector<T> dY(size_t(m.batch() * m.out_features()));
  mse_backward(m.batch() * m.out_features(), m.output(), target, dY.data());
  return dY;
}

template <class T>
void backward_mse(Sequential<T>& m, const T* target) {
  m.backward(mse_grad(m, target).data());
}

template <class DistributedModel>  // hddp::DistributedModel (distributed/ddp.h), not needed here
void backward_mse(DistributedModel& ddp, const Sequential<float>& m, const float* target) {
  ddp.backward(mse_grad(m, target).data());
}

}  // namespace hddp::testing
