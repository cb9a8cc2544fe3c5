#pragma once
// The built-in layers, at two levels:
//   - the kernels: free functions over plain row-major buffers, shapes in the signature (llm.c
//     style), below;
//   - the layer objects Sequential runs (core/layer.h's interface, namespace hddp::layers) and
//     the specs that name them in a layer list: Linear(in, out, bias), Tanh(), ReLU(),
//     Flatten(), Dropout(p). Conv2d and MaxPool2d are in core/conv.h.
//
// The kernels: B is the batch (rows). Every GEMM goes through hddp::gemm, every element-wise loop
// through kernels/elementwise.h. Backward functions ACCUMULATE parameter gradients (+=), as
// PyTorch does; input gradients are overwritten.
//
// Activations are the element-wise kernels themselves, over n = B * features values:
//   tanh_forward(n, X, Y)          Y = tanh(X)
//   tanh_backward(n, Y, dY, dX)    dX = dY * (1 - Y^2), from the saved OUTPUT Y
//   relu_forward(n, X, Y)          Y = max(X, 0)
//   relu_backward(n, Y, dY, dX)    dX = Y > 0 ? dY : 0, from the saved output
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/layer.h>
#include <hddp/kernels/elementwise.h>

namespace hddp {

// Linear (PyTorch nn.Linear): Y(B x out) = X(B x in) · W(out x in)^T + b(out).
// b may be nullptr (no bias). Throws std::invalid_argument on negative sizes or null buffers.
// Precision::Bf16 (float only): the products read X, W (and dY) rounded to bf16, sums in float.
template <class T>
void linear_forward(int64_t B, int64_t in, int64_t out, const T* X, const T* W, const T* b, T* Y,
                    Precision p = Precision::Float);

// Backward of linear_forward, given dY(B x out) = dLoss/dY:
//   dX(B x in)   = dY · W          (overwritten; dX == nullptr skips it, e.g. for the first layer)
//   dW(out x in) += dY^T · X
//   db(out)      += column sums of dY (db == nullptr: the layer has no bias)
// accumulate = false overwrites dW and db instead (=, not +=): the first backward after a
// zero_grad, without reading or clearing the old values first.
template <class T>
void linear_backward(int64_t B, int64_t in, int64_t out, const T* X, const T* W, const T* dY,
                     T* dX, T* dW, T* db, bool accumulate = true, Precision p = Precision::Float);

// MSE loss with mean reduction (PyTorch nn.MSELoss()): sum((Y - target)^2) / n over the n
// values of Y. Accumulated in double, returned as T.
template <class T>
T mse_forward(int64_t n, const T* Y, const T* target);

// Its gradient: dY = 2 (Y - target) / n (overwritten; dY may alias Y or target).
template <class T>
void mse_backward(int64_t n, const T* Y, const T* target, T* dY);

// Softmax cross-entropy with mean reduction (PyTorch nn.CrossEntropyLoss()): over the B rows of
// logits (B x C) and their labels (B values in [0, C)), the mean of -log softmax(row)[label].
// Stable: each row's maximum is subtracted before exp. Writes softmax(logits) to probs (B x C;
// may alias logits), which the backward takes. Accumulated in double; a label outside [0, C)
// throws std::invalid_argument naming the row.
template <class T>
double softmax_xent_forward(int64_t B, int64_t C, const T* logits, const int32_t* labels, T* probs);

// Its gradient: dlogits = (probs - onehot(labels)) / B (overwritten; may alias probs).
template <class T>
void softmax_xent_backward(int64_t B, int64_t C, const T* probs, const int32_t* labels, T* dlogits);

// The layer objects.
namespace layers {

// PyTorch's nn.Linear(in, out, bias): Y = X W^T + b; input {in} (any shape of in values),
// output {out}; or a sequence {T, in} (last dimension in, as nn.Linear on a (B, T, in)
// tensor), output {T, out}: B T rows through one product. Parameters "weight" (out x in), "bias" (out x 1); both initialised
// U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_(a=sqrt(5)) gives the weight the same bound).
template <class T>
class Linear final : public Layer<T> {
 public:
  Linear(int64_t in, int64_t out, bool bias = true);
  std::string name() const override;
  Shape setup(const Shape& in) override;
  std::vector<ParamSpec> parameters() const override;
  void reset_parameters(Rng& rng, T* const* params) const override;
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  // 2 B rows in out, + B rows out for the bias.
  double flops(int64_t batch) const override {
    const double n = double(batch) * double(rows_);
    return 2.0 * n * double(in_) * double(out_) + (bias_ ? n * double(out_) : 0.0);
  }
  int64_t in() const { return in_; }
  int64_t out() const { return out_; }
  bool bias() const { return bias_; }

 private:
  int64_t in_, out_;
  bool bias_;
  int64_t rows_ = 1;  // rows per sample: positions of a sequence (input (T, in)), else 1
};

// Element-wise activations, in place, differentiated from their output.
template <class T>
class Tanh final : public Layer<T> {
 public:
  std::string name() const override { return "Tanh()"; }
  Shape setup(const Shape& in) override { return n_ = numel(in), in; }
  bool in_place() const override { return true; }
  bool reads_nhwc() const override { return true; }  // value by value: any order
  bool keeps_layout() const override { return true; }
  void forward(const Forward<T>& f) const override { tanh_forward(f.batch * n_, f.x, f.y); }
  void backward(const Backward<T>& b) const override {
    if (b.dx) tanh_backward(b.batch * n_, b.y, b.dy, b.dx);
  }
  double flops(int64_t batch) const override { return double(batch) * double(n_); }

 private:
  int64_t n_ = 0;
};

template <class T>
class ReLU final : public Layer<T> {
 public:
  std::string name() const override { return "ReLU()"; }
  Shape setup(const Shape& in) override { return n_ = numel(in), in; }
  bool in_place() const override { return true; }
  bool reads_nhwc() const override { return true; }  // value by value: any order
  bool keeps_layout() const override { return true; }
  void forward(const Forward<T>& f) const override { relu_forward(f.batch * n_, f.x, f.y); }
  void backward(const Backward<T>& b) const override {
    if (b.dx) relu_backward(b.batch * n_, b.y, b.dy, b.dx);
  }
  double flops(int64_t batch) const override { return double(batch) * double(n_); }

 private:
  int64_t n_ = 0;
};

extern template class Linear<float>;
extern template class Linear<double>;

}  // namespace layers

// The specs of a layer list: Sequential<T> builds layers::X<T> from each.
inline LayerSpec Linear(int64_t in, int64_t out, bool bias = true) { return LayerSpec::of<layers::Linear>(in, out, bias); }
inline LayerSpec Tanh() { return LayerSpec::of<layers::Tanh>(); }
inline LayerSpec ReLU() { return LayerSpec::of<layers::ReLU>(); }

// Dropout's kernels. The mask is a pure function of (seed, element index): value i is kept when
// u_i < 1 - p, u_i = the top 53 bits of the i-th output of SplitMix64 started at `seed`, over
// 2^53 (a counter-based stream: the same mask for any thread count or schedule, for float and
// double alike). mask(n) = keep ? 1/(1-p) : 0, with 1/(1-p) rounded to T as PyTorch's
// noise.div_(1 - p); Y = X * mask (Y may alias X). p in [0, 1).
template <class T>
void dropout_forward(int64_t n, double p, uint64_t seed, const T* X, T* Y, T* mask);

// dX = dY * mask (dX may alias dY).
template <class T>
void dropout_backward(int64_t n, const T* mask, const T* dY, T* dX);

namespace layers {

// PyTorch's nn.Flatten(): (C, H, W) -> (C*H*W), the values in PyTorch's (row-major NCHW)
// order; any input shape becomes a vector. From NCHW it runs in place: a no-op there (and a copy
// when Sequential gives it an output buffer of its own). From a channels-last image it reorders
// (B, H, W, C) into (B, C*H*W), so the next layer's weights are PyTorch's.
template <class T>
class Flatten final : public Layer<T> {
 public:
  std::string name() const override { return "Flatten()"; }
  Shape setup(const Shape& in) override;
  bool in_place() const override { return !nhwc_; }
  bool reads_nhwc() const override { return true; }
  void set_layout(ImageLayout in, ImageLayout) override { nhwc_ = in == ImageLayout::NHWC && image_; }
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;

 private:
  int64_t n_ = 0, C_ = 0, P_ = 0;  // values; for an image input its channels and pixels
  bool image_ = false, nhwc_ = false;
};

// PyTorch's nn.Dropout(p): in training y = x * mask / (1 - p), mask ~ Bernoulli(1 - p) drawn
// from Forward::seed (dropout_forward); in evaluation, and for p = 0, y = x. In place. Saves
// one flag (saved[0]: 1 when a mask was applied) and the mask (saved[1..]) for backward.
// dropout_forward's seed is derive_seed(Forward::seed, width, 0), width = numel(input shape):
// Sequential gives every layer the same seed, so two Dropout layers of the same width in one
// model draw the same mask; layers of different widths draw unrelated ones.
template <class T>
class Dropout final : public Layer<T> {
 public:
  explicit Dropout(double p) : p_(p) {}
  std::string name() const override;
  Shape setup(const Shape& in) override;
  bool in_place() const override { return true; }
  int64_t saved_size(int64_t batch) const override { return 1 + batch * n_; }
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  double flops(int64_t batch) const override { return double(batch) * double(n_); }
  double p() const { return p_; }

 private:
  double p_;
  int64_t n_ = 0;
};

extern template class Flatten<float>;
extern template class Flatten<double>;
extern template class Dropout<float>;
extern template class Dropout<double>;

}  // namespace layers

inline LayerSpec Flatten() { return LayerSpec::of<layers::Flatten>(); }
inline LayerSpec Dropout(double p) { return LayerSpec::of<layers::Dropout>(p); }

}  // namespace hddp
