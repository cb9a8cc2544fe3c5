#include <hddp/core/layers.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/units.h>

namespace hddp {

Precision parse_precision(const std::string& name) {
  if (name == "float") return Precision::Float;
  if (name == "bf16") return Precision::Bf16;
  HDDP_CHECK_ARG(false, "unknown precision '" << name << "': expected float or bf16");
}

const char* to_string(Precision p) { return p == Precision::Bf16 ? "bf16" : "float"; }

namespace {
// C = op(A) op(B) + beta C: gemm, or gemm_bf16 for a float product in Precision::Bf16 where that
// is faster (bf16_product_pays: a bf16 unit here, and a product large enough).
template <class T>
void product(Precision p, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
             int64_t ldb, T beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    if (p == Precision::Bf16 && bf16_product_pays(M, N, K))
      return gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  gemm(ta, tb, M, N, K, T(1), A, lda, B, ldb, beta, C, ldc);
}
}  // namespace

template <class T>
void linear_forward(int64_t B, int64_t in, int64_t out, const T* X, const T* W, const T* b, T* Y, Precision p) {
  HDDP_CHECK_ARG(B >= 0 && in > 0 && out > 0,
                 "linear_forward: need B >= 0, in > 0, out > 0; got B=" << B << " in=" << in << " out=" << out);
  HDDP_CHECK_ARG(X && W && Y, "linear_forward: X, W and Y must not be null");
  if (B == 0) return;
  // Y(B x out) = X(B x in) · W^T, W stored out x in.
  product(p, Trans::No, Trans::Yes, B, out, in, X, in, W, in, T(0), Y, out);
  if (b) add_bias_rows(B, out, b, Y, out);
}

template <class T>
void linear_backward(int64_t B, int64_t in, int64_t out, const T* X, const T* W, const T* dY,
                     T* dX, T* dW, T* db, bool accumulate, Precision p) {
  HDDP_CHECK_ARG(B >= 0 && in > 0 && out > 0,
                 "linear_backward: need B >= 0, in > 0, out > 0; got B=" << B << " in=" << in << " out=" << out);
  HDDP_CHECK_ARG(X && W && dY && dW, "linear_backward: X, W, dY and dW must not be null");
  if (B == 0) {
    if (!accumulate) {  // nothing to add: the overwrite is zeros
      std::fill(dW, dW + out * in, T(0));
      if (db) std::fill(db, db + out, T(0));
    }
    return;
  }
  // dX(B x in) = dY(B x out) · W(out x in)
  if (dX) product(p, Trans::No, Trans::No, B, in, out, dY, out, W, in, T(0), dX, in);
  // dW(out x in) += dY^T(out x B) · X(B x in)
  product(p, Trans::Yes, Trans::No, out, in, B, dY, out, X, in, accumulate ? T(1) : T(0), dW, in);
  if (db) col_sums(B, out, dY, out, db, accumulate);
}

template <class T>
T mse_forward(int64_t n, const T* Y, const T* target) {
  HDDP_CHECK_ARG(n > 0, "mse_forward: need n > 0 values, got " << n);
  HDDP_CHECK_ARG(Y && target, "mse_forward: Y and target must not be null");
  return T(sum_sq_diff(n, Y, target) / double(n));
}

template <class T>
void mse_backward(int64_t n, const T* Y, const T* target, T* dY) {
  HDDP_CHECK_ARG(n > 0, "mse_backward: need n > 0 values, got " << n);
  HDDP_CHECK_ARG(Y && target && dY, "mse_backward: Y, target and dY must not be null");
  // PyTorch: norm = 2 / numel (a double scalar), grad = norm * (Y - target).
  scaled_diff(n, T(2.0 / double(n)), Y, target, dY);
}

template <class T>
double softmax_xent_forward(int64_t B, int64_t C, const T* logits, const int32_t* labels, T* probs) {
  HDDP_CHECK_ARG(B > 0 && C > 0, "softmax_xent_forward: need B > 0 rows and C > 0 classes; got B=" << B << " C=" << C);
  HDDP_CHECK_ARG(logits && labels && probs, "softmax_xent_forward: logits, labels and probs must not be null");
  for (int64_t i = 0; i < B; ++i)
    HDDP_CHECK_ARG(labels[i] >= 0 && labels[i] < C,
                   "softmax_xent_forward: row " << i << " has label " << labels[i] << ", outside [0, " << C << ")");
  // Rows split among threads (a language model's B T rows of a large vocabulary), each row's
  // loss kept and summed in order: the same result for any thread count.
  std::vector<double> row_loss(static_cast<size_t>(B));
  const auto row = [&](int64_t i) {
    const T* x = logits + i * C;
    T* p = probs + i * C;
    T m = x[0];
    for (int64_t j = 1; j < C; ++j) m = x[j] > m ? x[j] : m;
    const double x_label = double(x[labels[i]]) - double(m);  // read before p (which may alias x) is written
    const double sum = exp_shifted(C, x, double(m), p);  // p = exp(x - m)
    const double inv = 1.0 / sum;
    for (int64_t j = 0; j < C; ++j) p[j] = T(double(p[j]) * inv);
    row_loss[size_t(i)] = std::log(sum) - x_label;  // -log(exp(x_y - m) / sum)
  };
  if (B * C > kParallelMin) {  // no OpenMP region at all below: a classifier's small batches
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < B; ++i) row(i);
  } else {
    for (int64_t i = 0; i < B; ++i) row(i);
  }
  double loss = 0;
  for (double l : row_loss) loss += l;
  return loss / double(B);
}

template <class T>
void softmax_xent_backward(int64_t B, int64_t C, const T* probs, const int32_t* labels, T* dlogits) {
  HDDP_CHECK_ARG(B > 0 && C > 0, "softmax_xent_backward: need B > 0 rows and C > 0 classes; got B=" << B << " C=" << C);
  HDDP_CHECK_ARG(probs && labels && dlogits, "softmax_xent_backward: probs, labels and dlogits must not be null");
  const T inv_b = T(1.0 / double(B));
  for (int64_t i = 0; i < B; ++i) {
    const int32_t y = labels[i];
    HDDP_CHECK_ARG(y >= 0 && y < C, "softmax_xent_backward: row " << i << " has label " << y << ", outside [0, " << C << ")");
    for (int64_t j = 0; j < C; ++j) dlogits[i * C + j] = (probs[i * C + j] - (j == y ? T(1) : T(0))) * inv_b;
  }
}

#define HDDP_INSTANTIATE_LAYERS(T)                                                                  \
  template void linear_forward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*, Precision); \
  template void linear_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*, T*, \
                                   T*, bool, Precision);                                                  \
  template T mse_forward<T>(int64_t, const T*, const T*);                                          \
  template void mse_backward<T>(int64_t, const T*, const T*, T*);                                  \
  template double softmax_xent_forward<T>(int64_t, int64_t, const T*, const int32_t*, T*);         \
  template void softmax_xent_backward<T>(int64_t, int64_t, const T*, const int32_t*, T*);
HDDP_INSTANTIATE_LAYERS(float)
HDDP_INSTANTIATE_LAYERS(double)

int64_t numel(const Shape& s) { return checked_product(s, "shape " + to_string(s)); }

std::string to_string(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

namespace layers {

template <class T>
Linear<T>::Linear(int64_t in, int64_t out, bool bias) : in_(in), out_(out), bias_(bias) {}

template <class T>
std::string Linear<T>::name() const {
  return "Linear(" + std::to_string(in_) + ", " + std::to_string(out_) + (bias_ ? ")" : ", bias=False)");
}

template <class T>
Shape Linear<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(in_ > 0 && out_ > 0, "in and out must be positive");
  const bool sequence = in.size() == 2 && in[1] == in_;  // (T, in), T = 1 included
  if (!sequence && numel(in) == in_) return rows_ = 1, Shape{out_};
  // A sequence (T, in): every position alike, as nn.Linear on the last dimension.
  HDDP_CHECK_ARG(in.size() >= 2 && in.back() == in_, "expects " << in_ << " input features but gets " << numel(in)
                                                                 << " (input shape " << to_string(in) << ")");
  rows_ = numel(in) / in_;
  Shape out = in;
  out.back() = out_;
  return out;
}

template <class T>
std::vector<ParamSpec> Linear<T>::parameters() const {
  std::vector<ParamSpec> p{{"weight", out_, in_}};
  if (bias_) p.push_back({"bias", out_, 1, {out_}, false});
  return p;
}

template <class T>
void Linear<T>::reset_parameters(Rng& rng, T* const* params) const {
  const T bound = T(1.0 / std::sqrt(double(in_)));
  for (int64_t k = 0; k < in_ * out_; ++k) params[0][k] = rng.uniform<T>(-bound, bound);
  if (bias_)
    for (int64_t k = 0; k < out_; ++k) params[1][k] = rng.uniform<T>(-bound, bound);
}

template <class T>
void Linear<T>::forward(const Forward<T>& f) const {
  linear_forward(f.batch * rows_, in_, out_, f.x, f.params[0], bias_ ? f.params[1] : nullptr, f.y,
                 f.bf16 ? Precision::Bf16 : Precision::Float);
}

template <class T>
void Linear<T>::backward(const Backward<T>& b) const {
  linear_backward(b.batch * rows_, in_, out_, b.x, b.params[0], b.dy, b.dx, b.grads[0], bias_ ? b.grads[1] : nullptr,
                  b.accumulate, b.bf16 ? Precision::Bf16 : Precision::Float);
}

template class Linear<float>;
template class Linear<double>;

}  // namespace layers

template <class T>
void dropout_forward(int64_t n, double p, uint64_t seed, const T* X, T* Y, T* mask) {
  HDDP_CHECK_ARG(n >= 0 && p >= 0 && p < 1, "dropout_forward: need n >= 0 and p in [0, 1); got n=" << n << " p=" << p);
  HDDP_CHECK_ARG(X && Y && mask, "dropout_forward: X, Y and mask must not be null");
  const T scale = T(1) / T(1 - p);  // PyTorch: noise.bernoulli_(1 - p).div_(1 - p), in T
  const double keep = 1 - p;
  // SplitMix64's i-th output is its finaliser at seed + (i + 1) * increment: any value alone.
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    uint64_t x = seed + uint64_t(i) * 0x9e3779b97f4a7c15ULL;
    const double u = double(splitmix64_next(x) >> 11) * 0x1.0p-53;
    mask[i] = u < keep ? scale : T(0);
    Y[i] = X[i] * mask[i];
  }
}

template <class T>
void dropout_backward(int64_t n, const T* mask, const T* dY, T* dX) {
  HDDP_CHECK_ARG(n >= 0, "dropout_backward: need n >= 0, got " << n);
  HDDP_CHECK_ARG(mask && dY && dX, "dropout_backward: mask, dY and dX must not be null");
#pragma omp parallel for schedule(static) if (n > kParallelMin)
  for (int64_t i = 0; i < n; ++i) dX[i] = dY[i] * mask[i];
}

template void dropout_forward<float>(int64_t, double, uint64_t, const float*, float*, float*);
template void dropout_forward<double>(int64_t, double, uint64_t, const double*, double*, double*);
template void dropout_backward<float>(int64_t, const float*, const float*, float*);
template void dropout_backward<double>(int64_t, const double*, const double*, double*);

namespace layers {

template <class T>
Shape Flatten<T>::setup(const Shape& in) {
  n_ = numel(in);
  image_ = in.size() == 3;
  if (image_) C_ = in[0], P_ = in[1] * in[2];
  return {n_};
}

template <class T>
void Flatten<T>::forward(const Forward<T>& f) const {
  if (nhwc_) {  // (B, P, C) -> (B, C, P)
#pragma omp parallel for schedule(static) if (f.batch * n_ > kParallelMin)
    for (int64_t b = 0; b < f.batch; ++b)
      for (int64_t c = 0; c < C_; ++c)
        for (int64_t p = 0; p < P_; ++p) f.y[(b * C_ + c) * P_ + p] = f.x[(b * P_ + p) * C_ + c];
  } else if (f.y != f.x) {
    std::memcpy(f.y, f.x, sizeof(T) * size_t(f.batch * n_));
  }
}

template <class T>
void Flatten<T>::backward(const Backward<T>& b) const {
  if (!b.dx) return;
  if (nhwc_) {  // (B, C, P) -> (B, P, C)
#pragma omp parallel for schedule(static) if (b.batch * n_ > kParallelMin)
    for (int64_t i = 0; i < b.batch; ++i)
      for (int64_t p = 0; p < P_; ++p)
        for (int64_t c = 0; c < C_; ++c) b.dx[(i * P_ + p) * C_ + c] = b.dy[(i * C_ + c) * P_ + p];
  } else if (b.dx != b.dy) {
    std::memcpy(b.dx, b.dy, sizeof(T) * size_t(b.batch * n_));
  }
}

template <class T>
std::string Dropout<T>::name() const {
  std::ostringstream s;
  s << "Dropout(p=" << p_ << ")";
  return s.str();
}

template <class T>
Shape Dropout<T>::setup(const Shape& in) {
  HDDP_CHECK_ARG(p_ >= 0 && p_ < 1, "p must be in [0, 1), got " << p_);
  n_ = numel(in);
  return in;
}

template <class T>
void Dropout<T>::forward(const Forward<T>& f) const {
  const bool apply = f.training && p_ > 0;
  f.saved[0] = apply ? T(1) : T(0);
  if (apply)  // the stream salted with the width (layer.h: one seed serves every layer)
    dropout_forward(f.batch * n_, p_, derive_seed(f.seed, uint64_t(n_), 0), f.x, f.y, f.saved + 1);
  else if (f.y != f.x)
    std::memcpy(f.y, f.x, sizeof(T) * size_t(f.batch * n_));
}

template <class T>
void Dropout<T>::backward(const Backward<T>& b) const {
  if (!b.dx) return;
  if (b.saved[0] != T(0))
    dropout_backward(b.batch * n_, b.saved + 1, b.dy, b.dx);
  else if (b.dx != b.dy)
    std::memcpy(b.dx, b.dy, sizeof(T) * size_t(b.batch * n_));
}

template class Flatten<float>;
template class Flatten<double>;
template class Dropout<float>;
template class Dropout<double>;

}  // namespace layers

}  // namespace hddp
