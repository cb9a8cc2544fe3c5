#include <hddp/core/optim.h>

#include <cmath>
#include <type_traits>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

void validate(const AdamHyper& h) {
  HDDP_CHECK_ARG(h.lr > 0, "Adam: lr must be > 0, got " << h.lr);
  HDDP_CHECK_ARG(h.beta1 >= 0 && h.beta1 < 1, "Adam: beta1 must be in [0, 1), got " << h.beta1);
  HDDP_CHECK_ARG(h.beta2 >= 0 && h.beta2 < 1, "Adam: beta2 must be in [0, 1), got " << h.beta2);
  HDDP_CHECK_ARG(h.eps >= 0, "Adam: eps must be >= 0, got " << h.eps);
  HDDP_CHECK_ARG(h.weight_decay >= 0, "Adam: weight_decay must be >= 0, got " << h.weight_decay);
}

void validate(const AdamWHyper& h) {
  HDDP_CHECK_ARG(h.lr > 0 && std::isfinite(h.lr), "AdamW: lr must be finite and > 0, got " << h.lr);
  HDDP_CHECK_ARG(h.beta1 >= 0 && h.beta1 < 1, "AdamW: beta1 must be in [0, 1), got " << h.beta1);
  HDDP_CHECK_ARG(h.beta2 >= 0 && h.beta2 < 1, "AdamW: beta2 must be in [0, 1), got " << h.beta2);
  HDDP_CHECK_ARG(h.eps >= 0 && std::isfinite(h.eps), "AdamW: eps must be finite and >= 0, got " << h.eps);
  HDDP_CHECK_ARG(h.weight_decay >= 0 && std::isfinite(h.weight_decay),
                 "AdamW: weight_decay must be finite and >= 0, got " << h.weight_decay);
  HDDP_CHECK_ARG(h.lr * h.weight_decay < 1, "AdamW: lr * weight_decay must be < 1 (the parameters are multiplied by "
                                                "1 - lr * weight_decay), got lr "
                                                << h.lr << " and weight_decay " << h.weight_decay);
}

void validate(const SgdHyper& h) {
  HDDP_CHECK_ARG(h.lr > 0, "SGD: lr must be > 0, got " << h.lr);
  HDDP_CHECK_ARG(h.momentum >= 0, "SGD: momentum must be >= 0, got " << h.momentum);
  HDDP_CHECK_ARG(h.weight_decay >= 0, "SGD: weight_decay must be >= 0, got " << h.weight_decay);
  HDDP_CHECK_ARG(!h.nesterov || h.momentum > 0, "SGD: nesterov requires momentum > 0, got momentum " << h.momentum);
}

template <class T>
Optimizer<T>::Optimizer(int64_t n) : n_(n) {
  HDDP_CHECK_ARG(n > 0, "optimizer: the number of parameters must be positive, got " << n);
}

template <class T>
void Optimizer<T>::step(ParamArena<T>& arena) {
  HDDP_CHECK_ARG(arena.size() == n_, kind() << ": built for " << n_ << " parameters, the arena has " << arena.size());
  step(arena.params(), arena.grads());
}

template <class T>
void Optimizer<T>::set_steps(int64_t t) {
  HDDP_CHECK_ARG(t >= 0, kind() << ": step count must be >= 0, got " << t);
  steps_ = t;
}

template <class T, class Hyper>
AdamFamily<T, Hyper>::AdamFamily(int64_t n, const Hyper& h)
    : Optimizer<T>(n), h_(h), m_(size_t(n), T(0)), v_(size_t(n), T(0)) {
  validate(h_);
}

template <class T, class Hyper>
void AdamFamily<T, Hyper>::step(T* params, const T* grads) {
  const int64_t t = ++this->steps_;
  const auto run = [&](int64_t b, int64_t e, const Hyper& h) {
    if constexpr (std::is_same_v<Hyper, AdamWHyper>)
      adamw_update(e - b, params + b, grads + b, m_.data() + b, v_.data() + b, t, h);
    else
      adam_update(e - b, params + b, grads + b, m_.data() + b, v_.data() + b, t, h);
  };
  if (groups_.empty()) return run(0, this->n_, h_);
  Hyper none = h_;
  none.weight_decay = 0;
  for (const Segment& s : groups_) run(s.begin, s.end, s.decay ? h_ : none);
}

template <class T, class Hyper>
void AdamFamily<T, Hyper>::set_decay_groups(const std::vector<ParamView>& views) {
  std::vector<Segment> g;
  int64_t at = 0;
  for (const ParamView& v : views) {
    HDDP_CHECK_ARG(v.offset == at, kind() << ": decay groups: parameter '" << v.name << "' at offset " << v.offset
                                          << ", expected " << at << " (the views must cover the arena in order)");
    if (!g.empty() && g.back().decay == v.decay) g.back().end += v.size();
    else g.push_back({at, at + v.size(), v.decay});
    at += v.size();
  }
  HDDP_CHECK_ARG(at == this->n_, kind() << ": decay groups cover " << at << " values, the optimizer has " << this->n_);
  groups_ = std::move(g);
}

template <class T, class Hyper>
int64_t AdamFamily<T, Hyper>::no_decay_values() const {
  int64_t n = 0;
  for (const Segment& s : groups_) n += s.decay ? 0 : s.end - s.begin;
  return n;
}

template <class T>
std::string Optimizer<T>::describe() const {
  return std::string(kind()) + " lr=" + exact_string(lr());
}

template <class T, class Hyper>
std::string AdamFamily<T, Hyper>::describe() const {
  return std::string(kind()) + " lr=" + exact_string(h_.lr) + " beta1=" + exact_string(h_.beta1) +
         " beta2=" + exact_string(h_.beta2) + " eps=" + exact_string(h_.eps) + " weight_decay=" + exact_string(h_.weight_decay) +
         (groups_.empty() ? "" : " no_decay_values=" + std::to_string(no_decay_values()));
}

template <class T>
std::string SGD<T>::describe() const {
  return std::string("sgd lr=") + exact_string(h_.lr) + " momentum=" + exact_string(h_.momentum) +
         " weight_decay=" + exact_string(h_.weight_decay) + " nesterov=" + (h_.nesterov ? "true" : "false");
}

template <class T, class Hyper>
const char* AdamFamily<T, Hyper>::kind() const {
  return std::is_same_v<Hyper, AdamWHyper> ? "adamw" : "adam";
}

template <class T, class Hyper>
std::vector<StateBuffer<T>> AdamFamily<T, Hyper>::state() {
  return {{"exp_avg", m_.data(), this->n_}, {"exp_avg_sq", v_.data(), this->n_}};
}

template <class T, class Hyper>
void AdamFamily<T, Hyper>::set_lr(double lr) {
  Hyper h = h_;
  h.lr = lr;
  validate(h);
  h_ = h;
}

template <class T>
SGD<T>::SGD(int64_t n, const SgdHyper& h) : Optimizer<T>(n), h_(h) {
  validate(h_);
  if (h_.momentum > 0) buf_.assign(size_t(n), T(0));
}

template <class T>
void SGD<T>::step(T* params, const T* grads) {
  sgd_update(this->n_, params, grads, buf_.empty() ? nullptr : buf_.data(), ++this->steps_, h_);
}

template <class T>
std::vector<StateBuffer<T>> SGD<T>::state() {
  if (buf_.empty()) return {};
  return {{"momentum_buffer", buf_.data(), this->n_}};
}

template <class T>
void SGD<T>::set_lr(double lr) {
  SgdHyper h = h_;
  h.lr = lr;
  validate(h);
  h_ = h;
}

template <class T>
double clip_grad_norm(int64_t n, T* grads, double max_norm) {
  HDDP_CHECK_ARG(n >= 0, "clip_grad_norm: n must be >= 0, got " << n);
  HDDP_CHECK_ARG(max_norm > 0 && std::isfinite(max_norm), "clip_grad_norm: max_norm must be finite and > 0, got "
                                                              << max_norm);
  const double total = std::sqrt(sum_sq(n, grads));
  clip_grad_norm(n, grads, max_norm, total);
  return total;
}

template <class T>
void clip_grad_norm(int64_t n, T* grads, double max_norm, double total_norm) {
  HDDP_CHECK_ARG(n >= 0, "clip_grad_norm: n must be >= 0, got " << n);
  HDDP_CHECK_ARG(max_norm > 0 && std::isfinite(max_norm), "clip_grad_norm: max_norm must be finite and > 0, got "
                                                              << max_norm);
  // PyTorch: clip_coef = max_norm / (total_norm + 1e-6) on T tensors, where a scalar over a
  // tensor is tensor.reciprocal() * scalar; then clamp(max=1.0), which keeps NaN.
  const T coef = T(max_norm) * (T(1) / (T(total_norm) + T(1e-6)));
  if (!(coef >= T(1))) scale(n, coef, grads);
}

template class Optimizer<float>;
template class Optimizer<double>;
template class AdamFamily<float, AdamHyper>;
template class AdamFamily<double, AdamHyper>;
template class AdamFamily<float, AdamWHyper>;
template class AdamFamily<double, AdamWHyper>;
template class SGD<float>;
template class SGD<double>;
template double clip_grad_norm<float>(int64_t, float*, double);
template double clip_grad_norm<double>(int64_t, double*, double);
template void clip_grad_norm<float>(int64_t, float*, double, double);
template void clip_grad_norm<double>(int64_t, double*, double, double);

}  // namespace hddp
