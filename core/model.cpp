#include <hddp/core/model.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <cstring>
#include <stdexcept>

#include <hddp/core/conv.h>
#include <hddp/core/layers.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {

namespace {

std::string layer_label(size_t i, const std::string& name) { return "layer " + std::to_string(i) + " (" + name + ")"; }

// The message of a layer's setup() without the file:line of the check that threw it.
std::string reason(const std::exception& e) {
  const std::string w = e.what();
  const size_t p = w.find(".cpp:");
  if (p == std::string::npos) return w;
  const size_t q = w.find(": ", p + 5);
  return q == std::string::npos ? w : w.substr(q + 2);
}

}  // namespace

template <class T>
Sequential<T>::Sequential(Shape input, std::vector<LayerSpec> layers, int64_t max_batch) {
  build(std::move(input), std::move(layers), max_batch, /*implied=*/false);
}

template <class T>
Sequential<T>::Sequential(std::vector<LayerSpec> layers, int64_t max_batch) {
  HDDP_CHECK_ARG(!layers.empty(), "Sequential: no layers");
  const std::shared_ptr<Layer<T>> first = layers.front().make<T>();
  const auto* linear = dynamic_cast<const layers::Linear<T>*>(first.get());
  HDDP_CHECK_ARG(linear, "Sequential: " << layer_label(0, first->name())
                                        << ": the input shape is not known; pass it first (Sequential({C, H, W}, "
                                           "layers, ...)) or start with a Linear");
  build({linear->in()}, std::move(layers), max_batch, /*implied=*/true);
}

template <class T>
Sequential<T>::Sequential(Shape input, std::vector<LayerSpec> layers, int64_t max_batch, Rng& rng)
    : Sequential(std::move(input), std::move(layers), max_batch) {
  reset_parameters(rng);
}

template <class T>
Sequential<T>::Sequential(std::vector<LayerSpec> layers, int64_t max_batch, Rng& rng)
    : Sequential(std::move(layers), max_batch) {
  reset_parameters(rng);
}

template <class T>
void Sequential<T>::build(Shape input, std::vector<LayerSpec> specs, int64_t max_batch, bool implied) {
  HDDP_CHECK_ARG(!specs.empty(), "Sequential: no layers");
  // An input implied by a first Linear is that layer's to check (its own message).
  HDDP_CHECK_ARG(implied || (!input.empty() && std::all_of(input.begin(), input.end(), [](int64_t d) { return d > 0; })),
                 "Sequential: the input shape " << to_string(input) << " must have positive sizes");
  shapes_.push_back(std::move(input));
  slots_.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    Slot s;
    std::string label = "layer " + std::to_string(i);
    try {
      s.layer = specs[i].make<T>();
      label = layer_label(i, s.layer->name());
      shapes_.push_back(s.layer->setup(shapes_.back()));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("Sequential: " + label + ": " + reason(e));
    }
    HDDP_CHECK_ARG(numel(shapes_.back()) > 0, "Sequential: " << label << ": gives an empty output shape "
                                                             << to_string(shapes_.back()));
    s.in_size = numel(shapes_[i]);
    s.out_size = numel(shapes_.back());
    slots_.push_back(std::move(s));
  }
  choose_layouts();
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    // In place only where no backward needs what it overwrites: the previous layer's output,
    // which an in-place previous layer reads in backward. The model's input copy is free.
    s.in_place = s.layer->in_place() && s.in_size == s.out_size &&
                 (i == 0 || (!slots_[i - 1].in_place && !slots_[i - 1].layer->keeps_output()));
    s.p_begin = arena_.size();
    for (const ParamSpec& p : s.layer->parameters()) {
      if (p.tie.empty()) {
        s.param_off.push_back(
            arena_.view(arena_.add(std::to_string(i) + "." + p.name, p.rows, p.cols, p.shape, p.decay)).offset);
        continue;
      }
      // One tensor, two uses: the earlier layer owns it; its backward adds to what this one wrote.
      const std::optional<size_t> k = arena_.find(p.tie);
      HDDP_CHECK_ARG(k, "Sequential: " << layer_name(i) << ": its parameter '" << p.name << "' is tied to '" << p.tie
                                       << "', which no earlier layer has");
      const ParamView& v = arena_.view(*k);
      HDDP_CHECK_ARG(v.rows == p.rows && v.cols == p.cols,
                     "Sequential: " << layer_name(i) << ": its parameter '" << p.name << "' (" << p.rows << " x "
                                    << p.cols << ") is tied to '" << p.tie << "' (" << v.rows << " x " << v.cols << ")");
      s.param_off.push_back(v.offset);
      slots_[size_t(std::stoll(v.name.substr(0, v.name.find('.'))))].tie_owner = true;
    }
    s.p_end = arena_.size();
  }
  // A ReLU in place after a layer that applies it in its own store (the direct convolution),
  // and a MaxPool2d after both where that layer pools in the same store.
  for (size_t i = 0; i + 1 < slots_.size(); ++i) {
    if (!dynamic_cast<const layers::ReLU<T>*>(slots_[i + 1].layer.get()) || !slots_[i + 1].in_place ||
        slots_[i].absorbed || !slots_[i].layer->fuse_relu())
      continue;
    slots_[i + 1].absorbed = true;
    slots_[i].fused = 1;
    const auto* pool = i + 2 < slots_.size() ? dynamic_cast<const layers::MaxPool2d<T>*>(slots_[i + 2].layer.get())
                                             : nullptr;
    if (pool && slots_[i].layer->fuse_maxpool(pool->kernel(), pool->stride())) {
      slots_[i + 2].absorbed = true;
      slots_[i].fused = 2;
    }
  }
  reserve(max_batch);
}

// Channels last between layers that both work so (layer.h): layer i may write NHWC where the
// next layer reads NHWC and, if that one keeps its input's layout, its own output may be NHWC
// too; decided from the last layer back (the model's output stays NCHW), then told to each
// layer from the first on (the model's input is NCHW).
template <class T>
void Sequential<T>::choose_layouts() {
  const size_t n = slots_.size();
  std::vector<bool> nhwc_ok(n, false);  // layer i's output may be NHWC
  for (size_t i = n - 1; i-- > 0;) {
    const Layer<T>& next = *slots_[i + 1].layer;
    nhwc_ok[i] = next.reads_nhwc() && (!next.keeps_layout() || nhwc_ok[i + 1]);
  }
  ImageLayout in = ImageLayout::NCHW;
  for (size_t i = 0; i < n; ++i) {
    Layer<T>& l = *slots_[i].layer;
    const ImageLayout out =
        l.keeps_layout() ? in : l.writes_nhwc() && nhwc_ok[i] ? ImageLayout::NHWC : ImageLayout::NCHW;
    HDDP_CHECK(in == ImageLayout::NCHW || l.reads_nhwc(), "Sequential: layer " << i << " given NHWC input");
    l.set_layout(in, out);
    in = out;
  }
}

template <class T>
void Sequential<T>::reset_parameters(Rng& rng) {
  // Each parameter starts as NaN, so one its layer's reset_parameters never writes is found
  // (a layer of one's own that does not override it) instead of training from silent zeros.
  T* p = arena_.params();
  std::fill(p, p + arena_.size(), std::numeric_limits<T>::quiet_NaN());
  for (size_t i = 0; i < slots_.size(); ++i) slots_[i].layer->reset_parameters(rng, ptrs_.data() + ptr_at_[i]);
  for (const ParamView& v : arena_.views())
    for (int64_t k = 0; k < v.size(); ++k)
      HDDP_CHECK_ARG(!std::isnan(p[v.offset + k]),
                     "Sequential: the initialisation left parameter '"
                         << v.name << "' (" << layer_name(size_t(std::stoll(v.name.substr(0, v.name.find('.')))))
                         << ") unset: give the layer a reset_parameters(rng, params) that writes every value "
                            "(zeros too, when zero is meant)");
}

template <class T>
void Sequential<T>::reserve(int64_t max_batch) {
  HDDP_CHECK_ARG(max_batch > 0, "Sequential: max_batch must be positive, got " << max_batch);
  if (max_batch <= max_batch_) return;
  max_batch_ = max_batch;
  int64_t off = 0, scratch = 0, widest = numel(shapes_.front());
  const int64_t input_size = widest;
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    s.in_off = i == 0 ? 0 : slots_[i - 1].out_off;
    if (i == 0) off = max_batch * input_size;
    if (s.in_place) {
      s.out_off = s.in_off;
    } else {
      s.out_off = off;
      off += max_batch * s.out_size;
    }
    s.saved_off = off;
    off += s.layer->saved_size(max_batch);
    scratch = std::max(scratch, s.layer->scratch_size(max_batch));
    widest = std::max(widest, s.out_size);
  }
  scratch_off_ = off;
  grad_off_[0] = off + scratch;
  grad_off_[1] = grad_off_[0] + max_batch * widest;
  work_.assign(size_t(grad_off_[1] + max_batch * widest), T(0));
  batch_ = 0;  // the saved activations are gone
  // The arena no longer grows: each layer's parameter and gradient pointers, fixed from here.
  ptrs_.clear();
  ptr_at_.clear();
  for (const Slot& s : slots_) {
    ptr_at_.push_back(ptrs_.size());
    for (int64_t o : s.param_off) ptrs_.push_back(arena_.params() + o);
    for (int64_t o : s.param_off) ptrs_.push_back(arena_.grads() + o);
  }
}

template <class T>
std::string Sequential<T>::layer_name(size_t i) const {
  return layer_label(i, slots_.at(i).layer->name());
}

template <class T>
std::string Sequential<T>::describe() const {
  std::string d;
  for (const Slot& s : slots_) d += (d.empty() ? "" : " -> ") + s.layer->name();
  return d;
}

template <class T>
std::pair<int64_t, int64_t> Sequential<T>::layer_param_range(size_t i) const {
  const Slot& s = slots_.at(i);
  return {s.p_begin, s.p_end};
}

template <class T>
const T* Sequential<T>::forward(std::span<const T> X, int64_t batch) {
  HDDP_CHECK_ARG(batch > 0 && batch <= max_batch_,
                 "Sequential::forward: " << layer_name(0) << ": batch " << batch
                                         << " is outside [1, max_batch=" << max_batch_ << "]");
  HDDP_CHECK_ARG(X.data(), "Sequential::forward: " << layer_name(0) << ": input is null");
  HDDP_CHECK_ARG(X.size() == size_t(batch * in_features()),
                 "Sequential::forward: " << layer_name(0) << " takes samples of shape " << to_string(input_shape())
                                         << " (" << in_features() << " values): a batch of " << batch << " is "
                                         << batch * in_features() << " values, the input holds " << X.size()
                                         << (X.size() % size_t(batch) == 0
                                                 ? " (" + std::to_string(X.size() / size_t(batch)) + " per sample)"
                                                 : std::string()));
  batch_ = 0;  // invalid until the whole forward is done
  T* w = work_.data();
  std::memcpy(w, X.data(), sizeof(T) * X.size());
  Forward<T> f;
  f.batch = batch, f.scratch = w + scratch_off_, f.training = training_;
  f.bf16 = std::is_same_v<T, float> && precision_ == Precision::Bf16;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.absorbed) continue;  // the layer before applied it
    // A layer with the next ones fused writes the last one's output.
    f.x = w + s.in_off, f.y = w + slots_[i + size_t(s.fused)].out_off, f.saved = w + s.saved_off;
    f.seed = derive_seed(seed_, i, 0);  // each layer its own stream: two Dropouts draw different masks
    f.params = ptrs_.data() + ptr_at_[i];
    s.layer->forward(f);
  }
  batch_ = batch;
  return output();
}

template <class T>
void Sequential<T>::backward(const T* dY) {
  HDDP_CHECK(batch_ > 0, "Sequential::backward: call forward() first");
  HDDP_CHECK_ARG(dY, "Sequential::backward: dY is null");
  run_backward(dY);
}

template <class T>
void Sequential<T>::run_backward(const T* dY) {
  T* w = work_.data();
  T* g[2] = {w + grad_off_[0], w + grad_off_[1]};
  // After zero_grad the layers overwrite their gradients; cleared before the first hook, so a
  // hook that reads grads() sees this backward's values, never a late zeroing.
  Backward<T> b;
  b.batch = batch_, b.scratch = w + scratch_off_;
  const bool overwrite = zero_pending_;
  // A tied parameter's owner adds to what a later layer wrote: its gradients start from zeros.
  if (overwrite)
    for (const Slot& s : slots_)
      if (s.tie_owner) std::fill(arena_.grads() + s.p_begin, arena_.grads() + s.p_end, T(0));
  b.bf16 = std::is_same_v<T, float> && precision_ == Precision::Bf16;
  zero_pending_ = false;
  const T* d = dY;  // dLoss/d(output of layer i)
  int64_t ready = arena_.size();
  for (size_t i = slots_.size(); i-- > 0;) {
    const Slot& s = slots_[i];
    if (s.absorbed) {  // the layer before differentiates it: dy passes through
      if (hook_) hook_(i, ready);
      continue;
    }
    // Layers alternate between the two buffers; an in-place layer works in place on ours
    // (not on a caller's dY). Layer 0's input gradient is never needed.
    const bool ours = d == g[0] || d == g[1];
    T* dx = s.in_place && ours ? const_cast<T*>(d) : d == g[0] ? g[1] : g[0];
    b.x = s.in_place ? nullptr : w + s.in_off;
    b.y = w + slots_[i + size_t(s.fused)].out_off, b.dy = d, b.dx = i > 0 ? dx : nullptr, b.saved = w + s.saved_off;
    b.params = ptrs_.data() + ptr_at_[i];
    b.grads = ptrs_.data() + ptr_at_[i] + s.param_off.size();
    b.accumulate = !overwrite || s.tie_owner;
    s.layer->backward(b);
    if (s.p_end > s.p_begin) ready = s.p_begin;
    d = dx;
    if (hook_) hook_(i, ready);
  }
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace hddp
