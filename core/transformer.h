#pragma once
// The layers of a GPT-style transformer (Radford et al. 2019; nanoGPT and llm.c's GPT-2), over
// the model's arenas like every layer (core/layer.h). A sample is a sequence of T positions: the
// model's input {T} holds token ids (as values of T: exact below 2^24), activations are {T, C}.
//
//   Embedding(vocab, C, T)     token + position embedding: {T} ids -> {T, C}
//   LayerNorm(C)               nn.LayerNorm(C) over the last dimension
//   GELU()                     nn.GELU(approximate='tanh')
//   CausalSelfAttention(C, H)  {T, 3C} (one Linear(C, 3C)'s q|k|v) -> {T, C}, fused (kernels/attention.h)
//   TiedLinear(weight, C, V)   y = x W^T with W an earlier layer's parameter (the LM head on "0.wte")
//
// Linear takes {T, C} position by position (core/layers.h), and Residual (core/residual.h) adds
// a block's input to its output. core/gpt.h assembles them into GPT-2's decoder.
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/core/layer.h>

namespace hddp {
namespace layers {

// Token and position embedding, nanoGPT's wte and wpe: y[t] = wte[x[t]] + wpe[t]. Input {T}: T
// token ids in [0, vocab) (another value throws std::invalid_argument naming the position), output
// {T, dim}. Parameters "wte" (vocab x dim) and "wpe" (T x dim), N(0, 1) as nn.Embedding's, no
// weight decay. Backward adds each position's gradient into the row of its token.
template <class T>
class Embedding final : public Layer<T> {
 public:
  Embedding(int64_t vocab, int64_t dim, int64_t context) : vocab_(vocab), dim_(dim), context_(context) {}
  std::string name() const override;
  Shape setup(const Shape& in) override;
  std::vector<ParamSpec> parameters() const override;
  void reset_parameters(Rng& rng, T* const* params) const override;
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  double flops(int64_t batch) const override { return double(batch) * double(context_ * dim_); }

 private:
  int64_t vocab_, dim_, context_;
};

// nn.LayerNorm(dim, eps) over the last dimension of its input (any shape ending in dim).
// Parameters "weight" (1) and "bias" (0), no weight decay. Saves each row's mean and 1/std.
template <class T>
class LayerNorm final : public Layer<T> {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5) : dim_(dim), eps_(eps) {}
  std::string name() const override;
  Shape setup(const Shape& in) override;
  std::vector<ParamSpec> parameters() const override;
  void reset_parameters(Rng& rng, T* const* params) const override;
  int64_t saved_size(int64_t batch) const override { return 2 * batch * rows_; }
  int64_t scratch_size(int64_t batch) const override;
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  double flops(int64_t batch) const override { return 8.0 * double(batch * rows_ * dim_); }

 private:
  int64_t dim_;
  double eps_;
  int64_t rows_ = 0;
};

// nn.GELU(approximate='tanh'), element-wise; differentiated from its input (not in place). Its
// output is recomputed, not kept, inside a Residual (recompute_output).
template <class T>
class GELU final : public Layer<T> {
 public:
  std::string name() const override { return "GELU(approximate='tanh')"; }
  Shape setup(const Shape& in) override { return n_ = numel(in), in; }
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  double flops(int64_t batch) const override { return 12.0 * double(batch * n_); }
  bool recompute_output() const override { return true; }

 private:
  int64_t n_ = 0;
};

// Causal multi-head self-attention on the q|k|v rows of one Linear(dim, 3 dim): input {T, 3 dim},
// output {T, dim} (heads side by side, for the output projection). The fused kernel of
// kernels/attention.h: no T x T matrix is stored, saved values are the log-sum-exp (heads x T
// per sample), and backward reads the layer's output (keeps_output).
template <class T>
class CausalSelfAttention final : public Layer<T> {
 public:
  CausalSelfAttention(int64_t dim, int64_t heads) : dim_(dim), heads_(heads) {}
  std::string name() const override;
  Shape setup(const Shape& in) override;
  bool keeps_output() const override { return true; }
  int64_t saved_size(int64_t batch) const override { return batch * heads_ * T_; }
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  // q.k and p.v for the T (T + 1) / 2 visible pairs of each head: 2 T (T + 1) dim per sample.
  double flops(int64_t batch) const override { return 2.0 * double(batch) * double(T_) * double(T_ + 1) * double(dim_); }
  int64_t heads() const { return heads_; }

 private:
  int64_t dim_, heads_, T_ = 0;
};

// y = x W^T (no bias) with W (out x in) an earlier layer's parameter, named in full ("0.wte"):
// GPT-2's LM head reading the token embedding. Input {in} or {T, in}, output {out} or {T, out}.
template <class T>
class TiedLinear final : public Layer<T> {
 public:
  TiedLinear(std::string weight, int64_t in, int64_t out) : weight_(std::move(weight)), in_(in), out_(out) {}
  std::string name() const override;
  Shape setup(const Shape& in) override;
  std::vector<ParamSpec> parameters() const override { return {{"weight", out_, in_, {}, true, weight_}}; }
  void forward(const Forward<T>& f) const override;
  void backward(const Backward<T>& b) const override;
  double flops(int64_t batch) const override { return 2.0 * double(batch * rows_) * double(in_) * double(out_); }

 private:
  std::string weight_;
  int64_t in_, out_, rows_ = 1;
};

extern template class Embedding<float>;
extern template class Embedding<double>;
extern template class LayerNorm<float>;
extern template class LayerNorm<double>;
extern template class GELU<float>;
extern template class GELU<double>;
extern template class CausalSelfAttention<float>;
extern template class CausalSelfAttention<double>;
extern template class TiedLinear<float>;
extern template class TiedLinear<double>;

}  // namespace layers

inline LayerSpec Embedding(int64_t vocab, int64_t dim, int64_t context) {
  return LayerSpec::of<layers::Embedding>(vocab, dim, context);
}
inline LayerSpec LayerNorm(int64_t dim, double eps = 1e-5) { return LayerSpec::of<layers::LayerNorm>(dim, eps); }
inline LayerSpec GELU() { return LayerSpec::of<layers::GELU>(); }
inline LayerSpec CausalSelfAttention(int64_t dim, int64_t heads) {
  return LayerSpec::of<layers::CausalSelfAttention>(dim, heads);
}
inline LayerSpec TiedLinear(std::string weight, int64_t in, int64_t out) {
  return LayerSpec::of<layers::TiedLinear>(std::move(weight), in, out);
}

}  // namespace hddp
