#include <hddp/core/transformer.h>

#include <cmath>
#include <cstring>
#include <sstream>

#include <hddp/core/layers.h>
#include <hddp/kernels/attention.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/elementwise.h>

namespace hddp::layers {

namespace {
// Rows of `dim` values in a shape ending in dim: the positions of a sequence, 1 for a vector.
int64_t rows_of(const Shape& in, int64_t dim, const char* what) {
  HDDP_CHECK_ARG(dim > 0, what << ": the dimension must be positive, got " << dim);
  HDDP_CHECK_ARG(!in.empty() && in.back() == dim,
                 what << ": expects inputs whose last dimension is " << dim << ", got " << to_string(in));
  return numel(in) / dim;
}
}  // namespace

template <class T>
std::string Embedding<T>::name() const {
  return "Embedding(vocab=" + std::to_string(vocab_) + ", dim=" + std::to_string(dim_) + ", context=" +
         std::to_string(context_) + ")";
}

template <class T>
Shape Embedding<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(vocab_ > 0 && dim_ > 0 && context_ > 0, "vocab, dim and context must be positive");
  HDDP_CHECK_ARG(numel(in) == context_, "expects " << context_ << " token ids per sample, gets " << to_string(in));
  return {context_, dim_};
}

template <class T>
std::vector<ParamSpec> Embedding<T>::parameters() const {
  return {{"wte", vocab_, dim_, {}, false}, {"wpe", context_, dim_, {}, false}};
}

template <class T>
void Embedding<T>::reset_parameters(Rng& rng, T* const* params) const {
  for (int64_t k = 0; k < vocab_ * dim_; ++k) params[0][k] = rng.normal<T>(0.0, 1.0);
  for (int64_t k = 0; k < context_ * dim_; ++k) params[1][k] = rng.normal<T>(0.0, 1.0);
}

template <class T>
void Embedding<T>::forward(const Forward<T>& f) const {
  const T *wte = f.params[0], *wpe = f.params[1];
  for (int64_t i = 0; i < f.batch * context_; ++i) {
    const T v = f.x[i];
    const bool in_range = v >= T(0) && v < T(vocab_);  // false for NaN: converted only when true
    const int64_t id = in_range ? int64_t(v) : 0;
    HDDP_CHECK_ARG(in_range && T(id) == v, "Embedding: sample " << i / context_ << ", position "
                                                                               << i % context_ << ": token " << v
                                                                               << " is not an id in [0, " << vocab_ << ")");
    const T *e = wte + id * dim_, *p = wpe + (i % context_) * dim_;
    T* y = f.y + i * dim_;
#pragma omp simd
    for (int64_t d = 0; d < dim_; ++d) y[d] = e[d] + p[d];
  }
}

template <class T>
void Embedding<T>::backward(const Backward<T>& b) const {
  T *dwte = b.grads[0], *dwpe = b.grads[1];
  if (!b.accumulate) {
    std::fill(dwte, dwte + vocab_ * dim_, T(0));
    std::fill(dwpe, dwpe + context_ * dim_, T(0));
  }
  if (b.dx) std::fill(b.dx, b.dx + b.batch * context_, T(0));  // token ids have no gradient
  // Positions in order: each token's row sums its positions' gradients in one fixed order.
  for (int64_t i = 0; i < b.batch * context_; ++i) {
    const T* dy = b.dy + i * dim_;
    axpy(dim_, T(1), dy, dwte + int64_t(b.x[i]) * dim_);
    axpy(dim_, T(1), dy, dwpe + (i % context_) * dim_);
  }
}

template <class T>
std::string LayerNorm<T>::name() const {
  std::ostringstream s;
  s << "LayerNorm(" << dim_;
  if (eps_ != 1e-5) s << ", eps=" << eps_;
  s << ")";
  return s.str();
}

template <class T>
Shape LayerNorm<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(eps_ >= 0 && std::isfinite(eps_), "eps must be finite and >= 0, got " << eps_);
  rows_ = rows_of(in, dim_, "LayerNorm");
  return in;
}

template <class T>
std::vector<ParamSpec> LayerNorm<T>::parameters() const {
  return {{"weight", dim_, 1, {dim_}, false}, {"bias", dim_, 1, {dim_}, false}};
}

template <class T>
void LayerNorm<T>::reset_parameters(Rng& /*rng*/, T* const* params) const {
  std::fill(params[0], params[0] + dim_, T(1));
  std::fill(params[1], params[1] + dim_, T(0));
}

template <class T>
int64_t LayerNorm<T>::scratch_size(int64_t batch) const {
  return layernorm_backward_scratch(batch * rows_, dim_);
}

template <class T>
void LayerNorm<T>::forward(const Forward<T>& f) const {
  const int64_t n = f.batch * rows_;
  layernorm_forward(n, dim_, f.x, f.params[0], f.params[1], eps_, f.y, f.saved, f.saved + n);
}

template <class T>
void LayerNorm<T>::backward(const Backward<T>& b) const {
  const int64_t n = b.batch * rows_;
  layernorm_backward(n, dim_, b.x, b.params[0], b.saved, b.saved + n, b.dy, b.dx, b.grads[0], b.grads[1],
                     b.accumulate, b.scratch);
}

template <class T>
void GELU<T>::forward(const Forward<T>& f) const {
  gelu_forward(f.batch * n_, f.x, f.y);
}

template <class T>
void GELU<T>::backward(const Backward<T>& b) const {
  if (b.dx) gelu_backward(b.batch * n_, b.x, b.dy, b.dx);
}

template <class T>
std::string CausalSelfAttention<T>::name() const {
  return "CausalSelfAttention(dim=" + std::to_string(dim_) + ", heads=" + std::to_string(heads_) + ")";
}

template <class T>
Shape CausalSelfAttention<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(dim_ > 0 && heads_ > 0 && dim_ % heads_ == 0,
                 "dim must be a positive multiple of heads, got dim " << dim_ << " and " << heads_ << " heads");
  HDDP_CHECK_ARG(in.size() == 2 && in[1] == 3 * dim_,
                 "expects (T, " << 3 * dim_ << ") inputs (q, k and v of one Linear(" << dim_ << ", " << 3 * dim_
                                << ")), got " << to_string(in));
  T_ = in[0];
  return {T_, dim_};
}

template <class T>
void CausalSelfAttention<T>::forward(const Forward<T>& f) const {
  attention_forward<T>({f.batch, T_, dim_, heads_}, f.x, f.y, f.saved);
}

template <class T>
void CausalSelfAttention<T>::backward(const Backward<T>& b) const {
  if (b.dx) attention_backward<T>({b.batch, T_, dim_, heads_}, b.x, b.y, b.saved, b.dy, b.dx);
}

template <class T>
std::string TiedLinear<T>::name() const {
  return "TiedLinear(" + std::to_string(in_) + ", " + std::to_string(out_) + ", weight=" + weight_ + ")";
}

template <class T>
Shape TiedLinear<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(out_ > 0, "out must be positive");
  HDDP_CHECK_ARG(!weight_.empty(), "name the parameter it reads (\"0.wte\")");
  rows_ = rows_of(in, in_, "TiedLinear");
  Shape out = in;
  out.back() = out_;
  return out;
}

template <class T>
void TiedLinear<T>::forward(const Forward<T>& f) const {
  linear_forward<T>(f.batch * rows_, in_, out_, f.x, f.params[0], nullptr, f.y,
                    f.bf16 ? Precision::Bf16 : Precision::Float);
}

template <class T>
void TiedLinear<T>::backward(const Backward<T>& b) const {
  linear_backward<T>(b.batch * rows_, in_, out_, b.x, b.params[0], b.dy, b.dx, b.grads[0], nullptr, b.accumulate,
                     b.bf16 ? Precision::Bf16 : Precision::Float);
}

template class Embedding<float>;
template class Embedding<double>;
template class LayerNorm<float>;
template class LayerNorm<double>;
template class GELU<float>;
template class GELU<double>;
template class CausalSelfAttention<float>;
template class CausalSelfAttention<double>;
template class TiedLinear<float>;
template class TiedLinear<double>;

}  // namespace hddp::layers
