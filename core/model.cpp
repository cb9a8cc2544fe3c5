#include "core/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/layers.h"
#include "kernels/check.h"
#include "kernels/elementwise.h"

namespace hddp {

std::string to_string(const LayerSpec& s) {
  switch (s.kind) {
    case LayerKind::Linear:
      return "Linear(" + std::to_string(s.in) + ", " + std::to_string(s.out) + (s.bias ? ")" : ", bias=False)");
    case LayerKind::Tanh: return "Tanh()";
    case LayerKind::ReLU: return "ReLU()";
  }
  return "?";
}

template <class T>
Sequential<T>::Sequential(std::vector<LayerSpec> specs, int64_t max_batch) {
  HDDP_CHECK_ARG(!specs.empty(), "Sequential: no layers");
  layers_.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const LayerSpec& s = specs[i];
    const std::string name = "layer " + std::to_string(i) + " (" + to_string(s) + ")";
    Layer L;
    L.spec = s;
    if (s.kind == LayerKind::Linear) {
      HDDP_CHECK_ARG(s.in > 0 && s.out > 0, "Sequential: " << name << ": in and out must be positive");
      HDDP_CHECK_ARG(i == 0 || s.in == widths_.back(),
                     "Sequential: " << name << " expects " << s.in << " input features but layer "
                                    << i - 1 << " gives " << (i ? widths_.back() : 0));
      if (i == 0) widths_.push_back(s.in);
      L.in = s.in, L.out = s.out;
      L.p_begin = arena_.size();
      L.w_off = arena_.view(arena_.add(std::to_string(i) + ".weight", s.out, s.in)).offset;
      if (s.bias) L.b_off = arena_.view(arena_.add(std::to_string(i) + ".bias", s.out, 1)).offset;
      L.p_end = arena_.size();
    } else {
      HDDP_CHECK_ARG(i > 0, "Sequential: " << name
                                           << ": the first layer must be Linear (it fixes the input width)");
      L.in = L.out = widths_.back();
      L.p_begin = L.p_end = arena_.size();
    }
    widths_.push_back(L.out);
    layers_.push_back(L);
  }
  reserve(max_batch);
}

template <class T>
Sequential<T>::Sequential(std::vector<LayerSpec> specs, int64_t max_batch, Rng& rng)
    : Sequential(std::move(specs), max_batch) {
  reset_parameters(rng);
}

template <class T>
void Sequential<T>::reset_parameters(Rng& rng) {
  for (const Layer& L : layers_) {
    if (L.spec.kind != LayerKind::Linear) continue;
    // kaiming_uniform_(a=sqrt(5)) on W and U(-1/sqrt(fan_in), ...) on b both give this bound.
    const T bound = T(1.0 / std::sqrt(double(L.in)));
    T* p = arena_.params();
    for (int64_t k = 0; k < L.in * L.out; ++k) p[L.w_off + k] = rng.uniform<T>(-bound, bound);
    if (L.b_off >= 0)
      for (int64_t k = 0; k < L.out; ++k) p[L.b_off + k] = rng.uniform<T>(-bound, bound);
  }
}

template <class T>
void Sequential<T>::reserve(int64_t max_batch) {
  HDDP_CHECK_ARG(max_batch > 0, "Sequential: max_batch must be positive, got " << max_batch);
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  const int64_t max_width = *std::max_element(widths_.begin(), widths_.end());
  act_off_.assign(widths_.size(), 0);
  int64_t off = 0;
  for (size_t i = 0; i < widths_.size(); ++i) {
    // An activation works in place: its output overwrites its input, which no backward reads
    // (tanh and ReLU differentiate from their output, the Linear before from its own input).
    if (i > 0 && layers_[i - 1].spec.kind != LayerKind::Linear) {
      act_off_[i] = act_off_[i - 1];
      continue;
    }
    act_off_[i] = off;
    off += max_batch * widths_[i];
  }
  grad_off_[0] = off;
  grad_off_[1] = off + max_batch * max_width;
  work_.assign(size_t(off + 2 * max_batch * max_width), T(0));
  batch_ = 0;  // the saved activations are gone
}

template <class T>
std::string Sequential<T>::layer_name(size_t i) const {
  return "layer " + std::to_string(i) + " (" + to_string(layers_.at(i).spec) + ")";
}

template <class T>
std::pair<int64_t, int64_t> Sequential<T>::layer_param_range(size_t i) const {
  const Layer& L = layers_.at(i);
  return {L.p_begin, L.p_end};
}

template <class T>
const T* Sequential<T>::forward(const T* X, int64_t batch, int64_t in_features) {
  HDDP_CHECK_ARG(in_features == widths_.front(),
                 "Sequential::forward: " << layer_name(0) << " expects " << widths_.front()
                                         << " input features, got " << in_features);
  return forward(X, batch);
}

template <class T>
const T* Sequential<T>::forward(const T* X, int64_t batch) {
  HDDP_CHECK_ARG(batch > 0 && batch <= max_batch_,
                 "Sequential::forward: " << layer_name(0) << ": batch " << batch
                                         << " is outside [1, max_batch=" << max_batch_ << "]");
  HDDP_CHECK_ARG(X, "Sequential::forward: " << layer_name(0) << ": input is null");
  batch_ = 0;  // invalid until the whole forward is done
  std::memcpy(act_ptr(0), X, sizeof(T) * size_t(batch * widths_.front()));
  const T* p = arena_.params();
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& L = layers_[i];
    const T* x = act_ptr(i);
    T* y = act_ptr(i + 1);
    switch (L.spec.kind) {
      case LayerKind::Linear:
        linear_forward(batch, L.in, L.out, x, p + L.w_off, L.b_off >= 0 ? p + L.b_off : nullptr, y);
        break;
      case LayerKind::Tanh: tanh_forward(batch * L.out, x, y); break;
      case LayerKind::ReLU: relu_forward(batch * L.out, x, y); break;
    }
  }
  batch_ = batch;
  return act_ptr(layers_.size());
}

template <class T>
T Sequential<T>::loss(const T* target) const {
  HDDP_CHECK(batch_ > 0, "Sequential::loss: call forward() first");
  HDDP_CHECK_ARG(target, "Sequential::loss: target is null");
  return mse_forward(batch_ * widths_.back(), act_ptr(layers_.size()), target);
}

template <class T>
void Sequential<T>::backward(const T* target) {
  HDDP_CHECK(batch_ > 0, "Sequential::backward: call forward() first");
  HDDP_CHECK_ARG(target, "Sequential::backward: target is null");
  T* dY = work_.data() + grad_off_[0];
  mse_backward(batch_ * widths_.back(), act_ptr(layers_.size()), target, dY);
  run_backward(dY);
}

template <class T>
void Sequential<T>::backward_from(const T* dY) {
  HDDP_CHECK(batch_ > 0, "Sequential::backward_from: call forward() first");
  HDDP_CHECK_ARG(dY, "Sequential::backward_from: dY is null");
  run_backward(dY);
}

template <class T>
void Sequential<T>::run_backward(const T* dY) {
  const int64_t B = batch_;
  T* g[2] = {work_.data() + grad_off_[0], work_.data() + grad_off_[1]};
  const T* p = arena_.params();
  T* gp = arena_.grads();
  // After zero_grad the layers overwrite their gradients; cleared before the first hook, so a
  // hook that reads grads() sees this backward's values, never a late zeroing.
  const bool accumulate = !zero_pending_;
  zero_pending_ = false;
  const T* d = dY;  // dLoss/d(output of layer i)
  int64_t ready = arena_.size();
  for (size_t i = layers_.size(); i-- > 0;) {
    const Layer& L = layers_[i];
    // Linear layers alternate between the two buffers; an activation works in place on ours
    // (not on a caller's dY).
    const bool ours = d == g[0] || d == g[1];
    T* dx = L.spec.kind != LayerKind::Linear && ours ? const_cast<T*>(d) : d == g[0] ? g[1] : g[0];
    switch (L.spec.kind) {
      case LayerKind::Linear:
        // Layer 0's input gradient is never needed.
        linear_backward(B, L.in, L.out, act_ptr(i), p + L.w_off, d, i > 0 ? dx : nullptr, gp + L.w_off,
                        L.b_off >= 0 ? gp + L.b_off : nullptr, accumulate);
        ready = L.p_begin;
        break;
      case LayerKind::Tanh: tanh_backward(B * L.out, act_ptr(i + 1), d, dx); break;
      case LayerKind::ReLU: relu_backward(B * L.out, act_ptr(i + 1), d, dx); break;
    }
    d = dx;
    if (hook_) hook_(i, ready);
  }
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace hddp
