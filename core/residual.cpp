#include <hddp/core/residual.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include <hddp/core/rng.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/elementwise.h>

namespace hddp::layers {

template <class T>
Residual<T>::Residual(std::vector<LayerSpec> layers) : specs_(std::move(layers)) {}

template <class T>
std::string Residual<T>::name() const {
  std::string d;
  for (const LayerSpec& s : specs_) d += (d.empty() ? "" : " -> ") + s.name();
  return "Residual(" + d + ")";
}

template <class T>
Shape Residual<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(!specs_.empty(), "Residual: no layers");
  subs_.clear();
  n_ = widest_ = numel(in);
  n_params_ = 0;
  Shape s = in;
  for (size_t j = 0; j < specs_.size(); ++j) {
    Sub sub;
    sub.layer = specs_[j].make<T>();
    try {
      s = sub.layer->setup(s);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("Residual: sub-layer " + std::to_string(j) + " (" + sub.layer->name() + "): " + e.what());
    }
    sub.layer->set_layout(ImageLayout::NCHW, ImageLayout::NCHW);
    sub.out_size = numel(s);
    widest_ = std::max(widest_, sub.out_size);
    sub.p_at = n_params_;
    for (const ParamSpec& p : sub.layer->parameters())
      HDDP_CHECK_ARG(p.tie.empty(), "Residual: sub-layer " << j << " (" << sub.layer->name()
                                                           << ") ties a parameter; tie at the model's level");
    sub.n_params = sub.layer->parameters().size();
    n_params_ += sub.n_params;
    subs_.push_back(std::move(sub));
  }
  // A layer's output is recomputed where it asks, has neither parameters nor saved values, is
  // not the last (whose output is the block's) and its input is kept (not itself recomputed).
  any_recompute_ = false;
  for (size_t j = 0; j + 1 < subs_.size(); ++j) {
    const Layer<T>& l = *subs_[j].layer;
    subs_[j].recompute = l.recompute_output() && !l.keeps_output() && subs_[j].n_params == 0 &&
                         l.saved_size(1) == 0 && (j == 0 || !subs_[j - 1].recompute);
    any_recompute_ = any_recompute_ || subs_[j].recompute;
  }
  HDDP_CHECK_ARG(s == in, "Residual: the chain gives " << to_string(s) << " for an input of " << to_string(in)
                                                       << "; a residual block must keep its input's shape");
  return in;
}

template <class T>
std::vector<ParamSpec> Residual<T>::parameters() const {
  std::vector<ParamSpec> all;
  for (size_t j = 0; j < subs_.size(); ++j)
    for (ParamSpec p : subs_[j].layer->parameters()) {
      p.name = std::to_string(j) + "." + p.name;
      all.push_back(std::move(p));
    }
  return all;
}

template <class T>
void Residual<T>::reset_parameters(Rng& rng, T* const* params) const {
  for (const Sub& s : subs_) s.layer->reset_parameters(rng, params + s.p_at);
}

template <class T>
bool Residual<T>::own_last() const {
  const Layer<T>& last = *subs_.back().layer;
  return last.keeps_output() || last.in_place();
}

template <class T>
int64_t Residual<T>::out_at(size_t j, int64_t batch) const {
  int64_t off = 0;
  for (size_t k = 0; k < j; ++k)
    off += (subs_[k].recompute ? 0 : batch * subs_[k].out_size) + subs_[k].layer->saved_size(batch);
  return off;
}

template <class T>
int64_t Residual<T>::saved_at(size_t j, int64_t batch) const {
  const bool own = (j + 1 < subs_.size() || own_last()) && !subs_[j].recompute;
  return out_at(j, batch) + (own ? batch * subs_[j].out_size : 0);
}

template <class T>
int64_t Residual<T>::saved_size(int64_t batch) const {
  return saved_at(subs_.size() - 1, batch) + subs_.back().layer->saved_size(batch);
}

template <class T>
int64_t Residual<T>::scratch_size(int64_t batch) const {
  int64_t sub = 0;
  for (const Sub& s : subs_) sub = std::max(sub, s.layer->scratch_size(batch));
  return sub_scratch_at(batch) + sub;
}

template <class T>
void Residual<T>::forward(const Forward<T>& f) const {
  const size_t last = subs_.size() - 1;
  T* const redo = f.scratch + 2 * f.batch * widest_;  // a recomputed output
  const T* in = f.x;
  for (size_t j = 0; j <= last; ++j) {
    Forward<T> g = f;
    g.x = in;
    g.y = j == last && !own_last() ? f.y : subs_[j].recompute ? redo : f.saved + out_at(j, f.batch);
    g.params = f.params + subs_[j].p_at;
    g.saved = f.saved + saved_at(j, f.batch);
    g.scratch = f.scratch + sub_scratch_at(f.batch);
    g.seed = derive_seed(f.seed, j, 1);
    subs_[j].layer->forward(g);
    in = g.y;
  }
  const int64_t n = f.batch * n_;
  if (in != f.y) std::memcpy(f.y, in, sizeof(T) * size_t(n));
  axpy(n, T(1), f.x, f.y);  // y = f(x) + x
}

template <class T>
void Residual<T>::backward(const Backward<T>& b) const {
  const size_t last = subs_.size() - 1;
  T* g[2] = {b.scratch, b.scratch + b.batch * widest_};
  T* const redo = b.scratch + 2 * b.batch * widest_;
  T* const sub_scratch = b.scratch + sub_scratch_at(b.batch);
  // Sub-layer j's output and input as forward wrote them (a recomputed one: in `redo`).
  auto out = [&](size_t j) -> const T* {
    return j == last && !own_last() ? b.y : subs_[j].recompute ? redo : b.saved + out_at(j, b.batch);
  };
  auto in = [&](size_t j) { return j == 0 ? b.x : out(j - 1); };
  const T* d = b.dy;  // dLoss/d(output of sub-layer j): the block's dy for the last
  for (size_t j = last + 1; j-- > 0;) {
    if (j > 0 && subs_[j - 1].recompute) {  // the input this backward reads, computed again
      Forward<T> f;
      f.batch = b.batch, f.bf16 = b.bf16, f.x = in(j - 1), f.y = redo, f.scratch = sub_scratch;
      f.params = b.params + subs_[j - 1].p_at;
      subs_[j - 1].layer->forward(f);
    }
    Backward<T> c = b;
    c.x = in(j);
    c.y = out(j);
    c.dy = d;
    c.dx = j == 0 ? b.dx : (d == g[0] ? g[1] : g[0]);
    c.params = b.params + subs_[j].p_at;
    c.grads = b.grads + subs_[j].p_at;
    c.saved = b.saved + saved_at(j, b.batch);
    c.scratch = sub_scratch;
    subs_[j].layer->backward(c);
    d = c.dx;
  }
  if (b.dx) axpy(b.batch * n_, T(1), b.dy, b.dx);  // + dy through the skip
}

template <class T>
double Residual<T>::flops(int64_t batch) const {
  double f = double(batch * n_);
  for (const Sub& s : subs_) f += s.layer->flops(batch);
  return f;
}

template class Residual<float>;
template class Residual<double>;

}  // namespace hddp::layers
