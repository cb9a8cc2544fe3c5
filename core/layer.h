#pragma once
// The layer interface: what Sequential (core/model.h) needs of a layer, the built-in ones
// (core/layers.h) and a user's own alike.
//
// A layer object holds its configuration and the input shape it was set up for; every buffer
// it touches belongs to the model: its parameters and gradients are slices of the model's two
// arenas, its activations, the values it keeps from forward to backward ("saved") and its
// temporary values ("scratch", shared by all layers) are slices of the model's work arena,
// allocated once for the largest batch. Shapes are per sample, batch first implied: {features}
// for a vector, {C, H, W} for an image (NCHW, PyTorch's layout); a buffer of `batch` samples of
// shape S holds batch x numel(S) values, row-major.
//
//   class Scale : public hddp::Layer<float> {          // y = a * x, one parameter
//    public:
//     std::string name() const override { return "Scale()"; }
//     hddp::Shape setup(const hddp::Shape& in) override { return in; }
//     std::vector<hddp::ParamSpec> parameters() const override { return {{"a", 1, 1}}; }
//     void forward(const hddp::Forward<float>& f) const override { ... f.x, f.y, f.params[0] ... }
//     void backward(const hddp::Backward<float>& b) const override { ... b.dy -> b.dx, b.grads[0] ... }
//   };
//   Sequential<float> model({hddp::Linear(1, 8), std::make_shared<Scale>()}, 32, rng);
//
// Sequential names the parameters "<layer index>.<name>" ("0.weight"), as PyTorch's
// nn.Sequential state_dict does, so weights saved as safetensors load in PyTorch.
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include <hddp/core/rng.h>
#include <hddp/kernels/conv.h>  // ImageLayout

namespace hddp {

// A per-sample shape ({features} or {C, H, W}) and its number of values (an hddp::Error when
// a dimension is negative or the product overflows).
using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);
std::string to_string(const Shape& s);  // "(1, 28, 28)"

// One parameter tensor of a layer: row-major rows x cols ("weight", out x in; "bias", out x 1),
// and its shape as PyTorch holds it, which safetensors files carry (a convolution's weight
// (out, in, kh, kw) is out x (in * kh * kw) here; a bias {out}); empty: rows x cols.
// decay: AdamW's weight decay applies (false for biases, norms' scales and embeddings: the
// groups GPT training uses). tie: the full name of an earlier layer's parameter ("0.wte") this
// one is: one tensor, two uses (a language model's head reads the token embedding). A tied
// parameter takes no arena space; both layers' gradients add into the one tensor.
struct ParamSpec {
  std::string name;
  int64_t rows = 0, cols = 0;
  std::vector<int64_t> shape = {};
  bool decay = true;
  std::string tie = {};
};

// How a model's products run (Sequential::set_precision): Float, or Bf16 as PyTorch's CPU autocast
// does it: the products of Linear (kernels/gemm_bf16.h) and of Conv2d at stride 1 (the direct
// convolution, kernels/conv.h) read their operands rounded to bf16 and sum in float, on the bf16
// unit measured fastest here (kernels/units.h: AMX, or AVX512_BF16 where it beats the float FMA);
// products no bf16 unit takes run in float (on a CPU without one, Bf16 is Float: never slower),
// and so do products too small to pay for the conversion (gemm_bf16.h, bf16_product_pays).
// Activations, losses, reductions, the optimizer and the master weights stay float. Only float models compute in bf16 (a double model ignores it;
// Conv2d at other strides stays float).
enum class Precision { Float, Bf16 };
Precision parse_precision(const std::string& name);  // "float" or "bf16"; throws std::invalid_argument
const char* to_string(Precision p);

// What one forward call sees. x: batch x numel(input shape); y: batch x numel(output shape)
// (y == x for an in-place layer); params[k]: parameter k of parameters(); saved: saved_size()
// values kept for this layer's backward; scratch: scratch_size() values, free for any use
// during the call.
template <class T>
struct Forward {
  int64_t batch = 0;
  bool bf16 = false;  // products in bf16 (Precision::Bf16)
  const T* x = nullptr;
  T* y = nullptr;
  const T* const* params = nullptr;
  T* saved = nullptr;
  T* scratch = nullptr;
  bool training = true;  // false in evaluation (Dropout passes its input through)
  uint64_t seed = 0;     // this layer's seed for random layers: from Sequential::set_seed and its index
};

// What one backward call sees. dy: dLoss/dy; dx: dLoss/dx to write (overwrite), or nullptr when
// no one needs it (the first layer); grads[k]: the gradient of parameter k, to add into
// (accumulate) or to overwrite (!accumulate: the first backward after zero_grad). x is the
// layer's input as forward saw it, nullptr for an in-place layer (forward overwrote it: such a
// layer differentiates from y and its saved values); dx may equal dy for an in-place layer.
// y is the layer's output; only an in-place layer, or one that keeps_output(), may read it (the next layer may have run in
// place over the output of a layer that is not: Sequential keeps it only for in-place layers).
template <class T>
struct Backward {
  int64_t batch = 0;
  bool bf16 = false;  // products in bf16 (Precision::Bf16)
  const T* x = nullptr;
  const T* y = nullptr;
  const T* dy = nullptr;
  T* dx = nullptr;
  const T* const* params = nullptr;
  T* const* grads = nullptr;
  bool accumulate = true;
  const T* saved = nullptr;
  T* scratch = nullptr;
};

template <class T>
class Layer {
 public:
  virtual ~Layer() = default;

  // "Linear(20, 1, bias=False)": in messages and in a checkpoint's identity.
  virtual std::string name() const = 0;
  // Called once, before anything else, with the shape of the layer's input; returns the shape
  // of its output. Throws std::invalid_argument saying what does not fit (Sequential adds the
  // layer's index and name).
  virtual Shape setup(const Shape& in) = 0;
  // The parameters, in the order they are laid out in the arena and passed to forward/backward.
  virtual std::vector<ParamSpec> parameters() const { return {}; }
  // Initial values (PyTorch's default initialisation of the same layer), drawn from rng in
  // parameter order; params as in Forward.
  virtual void reset_parameters(Rng& /*rng*/, T* const* /*params*/) const {}
  // Values kept from forward to backward, and temporary values, for `batch` samples.
  virtual int64_t saved_size(int64_t /*batch*/) const { return 0; }
  virtual int64_t scratch_size(int64_t /*batch*/) const { return 0; }
  // True when the layer can compute with y == x: its backward reads only y, dy and saved. Sequential
  // runs it so unless the layer before it is in place too (whose backward reads that output).
  virtual bool in_place() const { return false; }
  // True when backward reads the layer's output y (the fused attention): Sequential then runs
  // no next layer in place over it.
  virtual bool keeps_output() const { return false; }
  // True when the output is cheap to compute again from the input alone (element-wise, no
  // parameters, no saved values, no randomness: GELU): Residual then keeps no copy of it from
  // forward to backward, and runs forward again just before the next layer's backward needs it.
  virtual bool recompute_output() const { return false; }

  // Channels last. An image activation {C, H, W} is NCHW (PyTorch's order) unless the layers on
  // both sides of it work channels-last (NHWC, the direct convolution's order, kernels/conv.h):
  // Sequential decides from these once, after setup(), and tells each layer (set_layout) before
  // it asks in_place() or any size. A model's input and output are always NCHW; a layer that
  // overrides none of these always sees NCHW.
  virtual bool reads_nhwc() const { return false; }    // can take an NHWC input
  virtual bool keeps_layout() const { return false; }  // writes its output in its input's layout
  virtual bool writes_nhwc() const { return false; }   // would rather write NHWC where the next layer reads it
  virtual void set_layout(ImageLayout /*in*/, ImageLayout /*out*/) {}

  // Asked once, after the layouts, when an in-place ReLU follows: return true to apply it in
  // this layer's own store. Sequential then skips the ReLU, and this layer's backward gets dy of
  // the ReLU's output and y = that output (dy counts only where y > 0).
  virtual bool fuse_relu() { return false; }
  // Asked after a fused ReLU when MaxPool2d(kernel, stride) follows: return true to pool in the
  // same store. Sequential then skips the pooling layer too: this layer writes the pooling's
  // output, keeps what backward needs in its own saved values, and its backward gets dy of the
  // pooled output and y = that output.
  virtual bool fuse_maxpool(int64_t /*kernel*/, int64_t /*stride*/) { return false; }

  virtual void forward(const Forward<T>& f) const = 0;
  virtual void backward(const Backward<T>& b) const = 0;

  // Floating-point operations of a forward of `batch` samples (a multiply-add counts 2), for
  // benchmarks' rates; 0 when not counted.
  virtual double flops(int64_t /*batch*/) const { return 0; }
};

// One entry of a layer list such as {Linear(1, 20), Tanh()}: what Sequential<T> builds a layer
// from. Either a recipe for both element types (the built-in specs; hddp::layer<L>(args...) for
// a user's class template L<T>), or a layer object the caller made (std::make_shared<MyLayer>(...),
// for Sequential of its element type only; one model per object, since setup() fixes its
// shapes).
class LayerSpec {
 public:
  template <template <class> class L, class... A>
  static LayerSpec of(A... args) {
    LayerSpec s;
    s.f32_ = [=] { return std::shared_ptr<Layer<float>>(std::make_shared<L<float>>(args...)); };
    s.f64_ = [=] { return std::shared_ptr<Layer<double>>(std::make_shared<L<double>>(args...)); };
    return s;
  }
  template <class L>
    requires std::is_base_of_v<Layer<float>, L> || std::is_base_of_v<Layer<double>, L>
  LayerSpec(std::shared_ptr<L> object) {  // NOLINT: implicit, so a list can hold objects
    if constexpr (std::is_base_of_v<Layer<float>, L>) f32_ = [object] { return std::shared_ptr<Layer<float>>(object); };
    if constexpr (std::is_base_of_v<Layer<double>, L>) f64_ = [object] { return std::shared_ptr<Layer<double>>(object); };
  }

  // The layer for Sequential<T>; throws std::invalid_argument for an object of the other type.
  template <class T>
  std::shared_ptr<Layer<T>> make() const {
    const auto& f = pick<T>();
    if (!f) throw std::invalid_argument(std::string("a layer of ") + (sizeof(T) == 4 ? "double" : "float") +
                                        " cannot be used in a model of " + (sizeof(T) == 4 ? "float" : "double"));
    return f();
  }
  std::string name() const { return f32_ ? f32_()->name() : f64_()->name(); }

 private:
  LayerSpec() = default;
  template <class T>
  const std::function<std::shared_ptr<Layer<T>>()>& pick() const {
    if constexpr (sizeof(T) == sizeof(float)) return f32_;
    else return f64_;
  }
  std::function<std::shared_ptr<Layer<float>>()> f32_;
  std::function<std::shared_ptr<Layer<double>>()> f64_;
};

// hddp::layer<MyLayer>(args...): the spec of a user's class template MyLayer<T>.
template <template <class> class L, class... A>
LayerSpec layer(A... args) {
  return LayerSpec::of<L>(std::move(args)...);
}

}  // namespace hddp
