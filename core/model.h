#pragma once
// Sequential<T>: a stack of layers (core/layer.h: the built-in ones of core/layers.h or a
// user's own). The loss is a separate object (core/loss.h) whose gradient backward takes.
//
//   Sequential<float> model({Linear(1, 20), Linear(20, 1, false), Tanh()}, /*max_batch=*/32, rng);
//   MseLoss<float> mse(1);
//   model.zero_grad();
//   const float* y = model.forward(x, 32);           // x: 32 x 1 values; y: 32 x 1
//   const double l = mse.forward(y, target, 32);     // mean over 32 x 1 values
//   model.backward(mse.grad());                      // gradients += into model.grads()
//   adam.step(model.params(), model.grads());
//
// The input shape is given first ({1, 28, 28} for images), or implied by a first Linear.
//
// Storage: parameters and gradients live in one ParamArena<T>, added in FORWARD layer order
// (layer 0 first; each layer's parameters() in its order, named "<index>.<name>": "0.weight",
// "0.bias"). Every activation, saved and scratch value is one work arena allocated for
// max_batch samples at construction (reserve() grows it once); forward/loss/backward never
// allocate. A layer that can run in place (Tanh, ReLU) shares its input's buffer, unless the
// layer before it reads its own output in backward.
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
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <hddp/core/arena.h>
#include <hddp/core/layer.h>
#include <hddp/core/layers.h>
#include <hddp/core/rng.h>

namespace hddp {

// What the data-parallel wrapper (hddp::DistributedModel) needs of a model: its parameters and
// gradients in one arena (the gradients of a backward written in place there), a backward from
// dLoss/dOutput of its last forward, and a hook that backward calls as gradients become final,
// with the contract described above. Sequential is one; a model of the user's own can be
// another.
template <class T>
class Module {
 public:
  using BackwardHook = std::function<void(size_t layer_index, int64_t grads_ready_from_offset)>;
  virtual ~Module() = default;
  virtual ParamArena<T>& arena() = 0;
  virtual void backward(const T* dY) = 0;
  virtual void set_backward_hook(BackwardHook hook) = 0;
};

template <class T>
class Sequential final : public Module<T> {
 public:
  using BackwardHook = typename Module<T>::BackwardHook;

  // Sets every layer up in order (the output shape of each is the input of the next) and
  // checks max_batch > 0; throws std::invalid_argument naming the layer that does not fit
  // ("layer 2 (Linear(4, 2)): expects 4 input features but gets 5"). Parameters start at
  // zero: call reset_parameters() or load them. Without `input`, a first Linear gives it.
  Sequential(Shape input, std::vector<LayerSpec> layers, int64_t max_batch);
  Sequential(std::vector<LayerSpec> layers, int64_t max_batch);
  // The same, then reset_parameters(rng).
  Sequential(Shape input, std::vector<LayerSpec> layers, int64_t max_batch, Rng& rng);
  Sequential(std::vector<LayerSpec> layers, int64_t max_batch, Rng& rng);

  // Each layer's reset_parameters, in forward order, from one stream (PyTorch's defaults).
  void reset_parameters(Rng& rng);

  // Forward of `batch` samples: X holds exactly batch x in_features() values, row-major (copied,
  // so X need not outlive the call). Returns the output (batch x out_features()), valid until
  // the next forward. Throws std::invalid_argument if batch is not in [1, max_batch()] or X's
  // size is not batch x in_features() (data of another sample shape: a 14 x 14 image handed to
  // a model of 28 x 28 inputs), naming both shapes. A buffer sized for max_batch() passes its
  // first rows: model.forward(std::span(x).first(rows * model.in_features()), rows).
  const T* forward(std::span<const T> X, int64_t batch);

  // Backward from dLoss/dOutput of the last forward (batch x out_features; a loss's grad(),
  // core/loss.h): gradients += into grads() (or = after zero_grad()).
  void backward(const T* dY) override;

  // Float (the default) or Bf16 products (layer.h, Precision); takes effect at the next forward.
  void set_precision(Precision p) { precision_ = p; }
  Precision precision() const { return precision_; }
  // Training (the default) or evaluation: Dropout is on only in training.
  void set_training(bool on) { training_ = on; }
  bool training() const { return training_; }
  // The seed random layers draw from in the next forward (Dropout's mask): set it per step, and
  // per rank in data-parallel training.
  void set_seed(uint64_t seed) { seed_ = seed; }

  // Gradients to zero, lazily: the next backward overwrites them instead of adding (no pass
  // that writes zeros, no read of the old values in the dW products); anything that reads them
  // before that backward (grads(), arena()) sees zeros. The same bits as clearing first.
  void zero_grad() { zero_pending_ = true; }
  void set_backward_hook(BackwardHook hook) override { hook_ = std::move(hook); }

  // Grows the work arena to max_batch samples (allocates once; never shrinks).
  void reserve(int64_t max_batch);

  // Shapes.
  const Shape& input_shape() const { return shapes_.front(); }
  const Shape& output_shape() const { return shapes_.back(); }
  int64_t in_features() const { return numel(shapes_.front()); }
  int64_t out_features() const { return numel(shapes_.back()); }
  int64_t max_batch() const { return max_batch_; }
  int64_t batch() const { return batch_; }  // samples of the last forward (0 before the first)
  size_t num_layers() const { return slots_.size(); }
  const Layer<T>& layer(size_t i) const { return *slots_.at(i).layer; }
  // The shape of layer i's input (i = num_layers(): the model's output).
  const Shape& shape_before(size_t i) const { return shapes_.at(i); }
  std::string layer_name(size_t i) const;  // "layer 1 (Linear(20, 1, bias=False))"
  std::string describe() const;            // "Linear(1, 20) -> Linear(20, 1, bias=False) -> Tanh()"
  // [begin, end) of layer i's parameters in the arena (begin == end for a layer without any,
  // at the offset where the next layer's parameters start).
  std::pair<int64_t, int64_t> layer_param_range(size_t i) const;

  // Parameters and gradients.
  ParamArena<T>& arena() override { return materialize(), arena_; }
  const ParamArena<T>& arena() const { return materialize(), arena_; }
  const std::vector<ParamView>& param_views() const { return arena_.views(); }
  int64_t num_params() const { return arena_.size(); }
  T* params() { return arena_.params(); }
  const T* params() const { return arena_.params(); }
  T* grads() { return materialize(), arena_.grads(); }
  const T* grads() const { return materialize(), arena_.grads(); }
  const T* output() const { return work_.data() + slots_.back().out_off; }

 private:
  struct Slot {
    std::shared_ptr<Layer<T>> layer;
    int64_t in_size = 0, out_size = 0;   // values per sample
    int64_t p_begin = 0, p_end = 0;      // arena range of its parameters
    std::vector<int64_t> param_off;      // arena offset of each parameter
    bool in_place = false;               // runs with its output in its input's buffer
    bool absorbed = false;               // a layer the one before applies in its own store
    bool tie_owner = false;              // a later layer ties to one of its parameters
    int fused = 0;                       // layers after this one it applies (absorbed)
    int64_t in_off = 0, out_off = 0, saved_off = 0;  // work arena offsets (max_batch samples)
  };
  void build(Shape input, std::vector<LayerSpec> layers, int64_t max_batch, bool implied);
  void choose_layouts();
  void run_backward(const T* dY);
  // A zero_grad not yet taken by a backward becomes real zeros (logically const: the values a
  // reader sees are zeros either way).
  void materialize() const {
    if (!zero_pending_) return;
    const_cast<ParamArena<T>&>(arena_).zero_grad();
    zero_pending_ = false;
  }

  std::vector<Slot> slots_;
  std::vector<Shape> shapes_;  // shapes_[i]: input of layer i; back(): the output
  ParamArena<T> arena_;
  int64_t max_batch_ = 0, batch_ = 0;
  bool training_ = true;
  Precision precision_ = Precision::Float;
  uint64_t seed_ = 0;
  mutable bool zero_pending_ = false;  // zero_grad() called; the next backward overwrites
  // work_: activations (the input copy first), each layer's saved values, one scratch area
  // (the largest any layer asks for), then two gradient buffers of max_batch x the widest
  // activation, used alternately in backward (in-place layers work on the one they get).
  std::vector<T> work_;
  int64_t scratch_off_ = 0, grad_off_[2] = {0, 0};
  std::vector<T*> ptrs_;  // per layer: its parameter pointers, then its gradient pointers
  std::vector<size_t> ptr_at_;
  BackwardHook hook_;
};

extern template class Sequential<float>;
extern template class Sequential<double>;

}  // namespace hddp
