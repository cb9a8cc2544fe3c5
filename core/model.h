#pragma once
// Sequential<T>: a stack of layers (Linear, Tanh, ReLU) trained with an MSE loss.
//
//   Sequential<float> model({Linear(1, 20), Linear(20, 1, false), Tanh()}, /*max_batch=*/32, rng);
//   model.zero_grad();
//   const float* y = model.forward(x, 32);   // 32 x 1
//   float l = model.loss(target);            // MSE, mean over 32 x 1 values
//   model.backward(target);                  // gradients += into model.grads()
//   adam.step(model.params(), model.grads());
//
// Storage: parameters and gradients live in one ParamArena<T>, added in FORWARD layer order
// (layer 0 first; per Linear "<i>.weight" (out x in) then "<i>.bias" (out)). Every forward and
// backward work buffer is allocated at construction for max_batch rows (reserve() grows them
// once); forward/loss/backward never allocate.
//
// Backward hook (set_backward_hook): backward walks the layers from the last to the first and,
// right after layer i is done, calls
//     hook(i, grads_ready_from_offset)
// where grads_ready_from_offset is the smallest arena offset whose gradient is now final:
// every gradient at offset >= grads_ready_from_offset is complete (the parameters of layers
// i..L-1). For a layer with parameters it is that layer's first offset; for a layer without
// parameters it repeats the previous call's value (num_params() when no layer with parameters
// has been done yet). The hook is called once per layer, L times per backward, in order
// i = L-1, ..., 0, on the calling thread; the distributed reducer starts reducing completed
// gradient buckets from there while backward continues.
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "core/rng.h"

namespace hddp {

enum class LayerKind { Linear, Tanh, ReLU };

struct LayerSpec {
  LayerKind kind = LayerKind::Linear;
  int64_t in = 0, out = 0;  // Linear only; activations keep the previous layer's width
  bool bias = true;         // Linear only
};

inline LayerSpec Linear(int64_t in, int64_t out, bool bias = true) { return {LayerKind::Linear, in, out, bias}; }
inline LayerSpec Tanh() { return {LayerKind::Tanh, 0, 0, false}; }
inline LayerSpec ReLU() { return {LayerKind::ReLU, 0, 0, false}; }

// "Linear(1, 20)", "Linear(20, 1, bias=False)", "Tanh()", "ReLU()".
std::string to_string(const LayerSpec& s);

template <class T>
class Sequential {
 public:
  using BackwardHook = std::function<void(size_t layer_index, int64_t grads_ready_from_offset)>;

  // Validates the stack (the first layer must be Linear; each Linear's `in` must equal the
  // width before it; positive sizes) and max_batch > 0, throwing std::invalid_argument
  // naming the layer. Parameters start at zero: call reset_parameters() or load them.
  Sequential(std::vector<LayerSpec> layers, int64_t max_batch);
  // Same, then reset_parameters(rng).
  Sequential(std::vector<LayerSpec> layers, int64_t max_batch, Rng& rng);

  // PyTorch's nn.Linear default, layer by layer in forward order, weight before bias:
  // W and b ~ U(-1/sqrt(in), 1/sqrt(in)), drawn with rng.uniform<T>.
  void reset_parameters(Rng& rng);

  // Forward of `batch` rows of X (batch x in_features(), row-major; copied, so X need not
  // outlive the call). Returns the output (batch x out_features()), valid until the next
  // forward. Throws std::invalid_argument if batch is not in [1, max_batch()]; the second
  // form also checks the caller's row width against layer 0.
  const T* forward(const T* X, int64_t batch);
  const T* forward(const T* X, int64_t batch, int64_t in_features);

  // MSE (mean over batch x out_features values) of the last forward's output against target.
  T loss(const T* target) const;
  // Backward of the MSE loss against target (batch x out_features): gradients += into grads().
  void backward(const T* target);
  // Backward from a given dLoss/dOutput (batch x out_features), for other losses.
  void backward_from(const T* dY);

  // Gradients to zero, lazily: the next backward overwrites them instead of adding (no pass
  // that writes zeros, no read of the old values in the dW products); anything that reads them
  // before that backward (grads(), arena()) sees zeros. The same bits as clearing first.
  void zero_grad() { zero_pending_ = true; }
  void set_backward_hook(BackwardHook hook) { hook_ = std::move(hook); }

  // Grows the work buffers to max_batch rows (allocates once; never shrinks).
  void reserve(int64_t max_batch);

  // Shapes.
  int64_t in_features() const { return widths_.front(); }
  int64_t out_features() const { return widths_.back(); }
  int64_t max_batch() const { return max_batch_; }
  int64_t batch() const { return batch_; }  // rows of the last forward (0 before the first)
  size_t num_layers() const { return layers_.size(); }
  const LayerSpec& layer(size_t i) const { return layers_.at(i).spec; }
  std::string layer_name(size_t i) const;  // "layer 1 (Linear(20, 1, bias=False))"
  // [begin, end) of layer i's parameters in the arena (begin == end for an activation, at
  // the offset where the next layer's parameters start).
  std::pair<int64_t, int64_t> layer_param_range(size_t i) const;

  // Parameters and gradients.
  ParamArena<T>& arena() { return materialize(), arena_; }
  const ParamArena<T>& arena() const { return materialize(), arena_; }
  const std::vector<ParamView>& param_views() const { return arena_.views(); }
  int64_t num_params() const { return arena_.size(); }
  T* params() { return arena_.params(); }
  const T* params() const { return arena_.params(); }
  T* grads() { return materialize(), arena_.grads(); }
  const T* grads() const { return materialize(), arena_.grads(); }
  const T* output() const { return act_ptr(layers_.size()); }

 private:
  struct Layer {
    LayerSpec spec;
    int64_t in = 0, out = 0;                 // widths before / after
    int64_t w_off = -1, b_off = -1;          // arena offsets, -1 if none
    int64_t p_begin = 0, p_end = 0;          // arena range of this layer's parameters
  };
  T* act_ptr(size_t i) { return work_.data() + act_off_[i]; }
  const T* act_ptr(size_t i) const { return work_.data() + act_off_[i]; }
  void run_backward(const T* dY);
  // A zero_grad not yet taken by a backward becomes real zeros (logically const: the values a
  // reader sees are zeros either way).
  void materialize() const {
    if (!zero_pending_) return;
    const_cast<ParamArena<T>&>(arena_).zero_grad();
    zero_pending_ = false;
  }

  std::vector<Layer> layers_;
  std::vector<int64_t> widths_;   // widths_[i]: width of the input of layer i; back(): output
  ParamArena<T> arena_;
  int64_t max_batch_ = 0, batch_ = 0;
  mutable bool zero_pending_ = false;  // zero_grad() called; the next backward overwrites
  // work_: activations act[0..L] (act[0] = copy of the input; an activation layer's output
  // shares its input's buffer), then two gradient buffers of max_batch x max width used
  // alternately by Linear layers in backward (activations work in place).
  std::vector<T> work_;
  std::vector<int64_t> act_off_;
  int64_t grad_off_[2] = {0, 0};
  BackwardHook hook_;
};

extern template class Sequential<float>;
extern template class Sequential<double>;

}  // namespace hddp
