#pragma once
// Element-wise kernels of the layers and optimizers, over plain buffers. Each runs the loop of
// the kernel set chosen for this CPU (AVX-512, AVX2 or portable, like the GEMM micro-kernels;
// HDDP_ELEMENTWISE_KERNEL forces one; elementwise/ holds the loops). OpenMP splits them only above
// kParallelMin units of work (below that a parallel region costs more than it saves). Every
// result is independent of the thread count, and of the kernel set except the last bit of the
// tanh of doubles.
#include <cstdint>

namespace hddp {

inline constexpr int64_t kParallelMin = int64_t(1) << 16;

// Y(M x N, row stride ldy): every row += b(N).
template <class T>
void add_bias_rows(int64_t M, int64_t N, const T* b, T* Y, int64_t ldy);

// out(N) = column sums of X(M x N, row stride ldx); accumulate: out += sums.
template <class T>
void col_sums(int64_t M, int64_t N, const T* X, int64_t ldx, T* out, bool accumulate);

// The element-wise kernel set in use: "avx512", "avx2" or "portable".
const char* elementwise_kernel_name();

// y = tanh(x); x and y may alias. Floats: computed in double, at most 0.50011 ulp from the exact
// value (checked over every float); doubles: SLEEF's vector
// tanh, 1.0 ulp. NaN gives NaN.
template <class T>
void tanh_forward(int64_t n, const T* x, T* y);

// dx = dy * (1 - y^2), from the saved output y = tanh(x); dx may alias dy.
template <class T>
void tanh_backward(int64_t n, const T* y, const T* dy, T* dx);

// GELU in PyTorch's tanh form (F.gelu(x, approximate='tanh')): y = 0.5 x (1 + tanh(sqrt(2/pi)
// (x + 0.044715 x^3))); x and y may alias.
template <class T>
void gelu_forward(int64_t n, const T* x, T* y);

// dx = dy * GELU'(x), from the saved input x; dx may alias dy.
template <class T>
void gelu_backward(int64_t n, const T* x, const T* dy, T* dx);

// LayerNorm over `rows` rows of C values (PyTorch's nn.LayerNorm(C, eps)): per row the mean and
// the biased variance (summed in double, one read of the row), rstd = 1 / sqrt(var + eps),
// Y = (X - mean) rstd w + b. Keeps mean and rstd (rows values each) for backward. Y may alias X.
template <class T>
void layernorm_forward(int64_t rows, int64_t C, const T* X, const T* w, const T* b, double eps, T* Y, T* mean,
                       T* rstd);

// Values of scratch layernorm_backward needs.
int64_t layernorm_backward_scratch(int64_t rows, int64_t C);
// One pass over the rows: dX (written; null: not wanted), and dw, db (C each; accumulate: +=,
// else overwritten). Rows go in fixed chunks whose partial sums of dw and db are added in
// chunk order: the same bits for any thread count. dX may alias dY.
template <class T>
void layernorm_backward(int64_t rows, int64_t C, const T* X, const T* w, const T* mean, const T* rstd, const T* dY,
                        T* dX, T* dw, T* db, bool accumulate, T* scratch);

// p[i] = T(exp(double(x[i]) - shift)) for i < n (p may alias x); returns the sum of the
// exponentials in double (eight running sums added in a fixed order: independent of the set's
// width). exp is SLEEF's (1.0 ulp), whose last bit may differ between sets. One thread: the
// caller splits rows (a softmax).
template <class T>
double exp_shifted(int64_t n, const T* x, double shift, T* p);

// y = max(x, 0); x and y may alias.
template <class T>
void relu_forward(int64_t n, const T* x, T* y);

// dx = (y > 0 ? dy : 0), from the saved output y = relu(x) (PyTorch's threshold_backward);
// dx may alias dy.
template <class T>
void relu_backward(int64_t n, const T* y, const T* dy, T* dx);

// Sum of (a[i] - b[i])^2, accumulated in double. The summation order depends on n only
// (fixed chunks, partial sums added in order), so the result is the same for any thread count.
template <class T>
double sum_sq_diff(int64_t n, const T* a, const T* b);

// Sum of x[i]^2, accumulated in double, in the order of sum_sq_diff (independent of the thread
// count). The squared 2-norm of gradients for clip_grad_norm (core/optim.h).
template <class T>
double sum_sq(int64_t n, const T* x);

// out = s * (a - b); out may alias a or b. (The MSE gradient with s = 2/n.)
template <class T>
void scaled_diff(int64_t n, T s, const T* a, const T* b, T* out);

// True when none of x[0, n) is NaN or +-Inf: the largest magnitude bit pattern stays below the
// exponent mask (an integer max, which vectorises; no branch per value, no FP flags raised).
template <class T>
bool all_finite(int64_t n, const T* x);

// y += a * x
template <class T>
void axpy(int64_t n, T a, const T* x, T* y);

// x *= a
template <class T>
void scale(int64_t n, T a, T* x);

// Adam step over a flat array, PyTorch 1.13's torch.optim.Adam (amsgrad=False, maximize=False,
// foreach=False):
//   g = grad + weight_decay * param
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// step is t, counted from 1. The scalars in double (as PyTorch's Python computes them), rounded
// to T; each tensor op rounded to T in PyTorch's order, every product rounded on its own:
// within an ulp or two per step of PyTorch's CPU kernels, which fuse two of the multiply-adds.
// (hddp's Adam has always computed so; its results, the tutorial's among them, keep their bits.)
struct AdamHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};
template <class T>
void adam_update(int64_t n, T* param, const T* grad, T* m, T* v, int64_t step, const AdamHyper& h);

// AdamW step, PyTorch 1.13's torch.optim.AdamW (amsgrad=False, maximize=False, foreach=False):
// decoupled weight decay (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", 2019),
//   param *= 1 - lr * weight_decay
// then Adam's update above with g = grad (no weight-decay term in the gradient), with the fused
// multiply-adds of PyTorch's AVX2/AVX-512 CPU kernels (elementwise_loops.h lists them): the
// same bits as PyTorch for float32 and float64.
struct AdamWHyper {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 1e-2;
};
template <class T>
void adamw_update(int64_t n, T* param, const T* grad, T* m, T* v, int64_t step, const AdamWHyper& h);

// SGD step, PyTorch's torch.optim.SGD (dampening 0):
//   g = grad + weight_decay * param
//   momentum > 0: buf = (first step ? g : momentum * buf + g); g = nesterov ? g + momentum*buf : buf
//   param -= lr * g
struct SgdHyper {
  double lr = 1e-2, momentum = 0.0, weight_decay = 0.0;
  bool nesterov = false;
};
template <class T>
void sgd_update(int64_t n, T* param, const T* grad, T* buf, int64_t step, const SgdHyper& h);

}  // namespace hddp
