// The element-wise loops, written once and compiled once per instruction set: included only by
// elementwise_{portable,avx2,avx512}.cpp, each built with its own flags (kernels/CMakeLists.txt).
// Everything here has internal linkage, so the three copies never meet at link time (one
// compiled for AVX-512 must not stand in for the others).
//
// The including file defines, before including this one, in hddp::detail's anonymous namespace:
//   struct VecTanh {                                    // SLEEF's tanh for doubles, exp for floats
//     static constexpr int64_t kD, kF;                  // doubles, floats per vector
//     static void d(const double* x, double* y);        // y[0, kD) = tanh(x[0, kD))
//     static void expf(const float* x, float* y);       // y[0, kF) = exp(x[0, kF)) (GELU)
//     static void expd(const double* x, double* y);     // y[0, kD) = exp(x[0, kD)) (softmax)
//   };
// and then calls make_elt_kernels(name).
//
// Plain loops for the vectoriser: `#pragma omp simd` where a loop carries no dependence, the
// sums in a fixed lane order so that every set adds in the same order (same bits).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <hddp/kernels/elementwise/elementwise_ukernel.h>

namespace hddp::detail {
namespace {

// tanh of floats, computed in double and rounded once: 0.50011 ulp at most from the exact value
// over every float (tests/kernels/test_tanh_accuracy.cpp; SLEEF's tanhf is 1.0 ulp, glibc's
// 2.19), the same bits in every set (plain IEEE operations, no FMA contraction, vectorised by
// the compiler at the set's width: no library call, no table, no branch), about 1.5-2x the
// speed of SLEEF's tanhf here (bench/results/step.md, "Element-wise loops per kernel set").
//   t = min(|x|, 9.1)            (tanh rounds to 1 in float beyond 9.01; NaN passes through)
//   u = expm1(2t / 32)           (Taylor to degree 7 on [0, 0.57])
//   u = u (u + 2), five times    (expm1(2a) = expm1(a) (expm1(a) + 2): u = expm1(2t))
//   tanh t = u / (u + 2), and x's sign (-0 stays -0)
// The truncation error (w^8/8!, relative) matters only where it cannot reach the float result:
// at small t it is below 1e-14, at large t tanh = 1 - 2/(u + 2) divides u's error by u.
inline void tanh_float_loop(int64_t n, const float* x, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x[i];
    double t = std::fabs(double(xi));
    t = t > 9.1 ? 9.1 : t;  // NaN compares false: stays NaN
    const double w = t * (2.0 / 32.0);
    double p = 1.0 / 5040.0;  // 1/7!
    p = p * w + 1.0 / 720.0;
    p = p * w + 1.0 / 120.0;
    p = p * w + 1.0 / 24.0;
    p = p * w + 1.0 / 6.0;
    p = p * w + 0.5;
    p = p * w + 1.0;
    double u = p * w;
    u = u * (u + 2.0), u = u * (u + 2.0), u = u * (u + 2.0), u = u * (u + 2.0), u = u * (u + 2.0);
    y[i] = std::copysign(float(u / (u + 2.0)), xi);
  }
}

// tanh of doubles: SLEEF's vector tanh (1.0 ulp) at the set's width, the tail through one
// padded vector.
inline void tanh_double_loop(int64_t n, const double* x, double* y) {
  constexpr int64_t W = VecTanh::kD;
  int64_t i = 0;
  for (; i + W <= n; i += W) VecTanh::d(x + i, y + i);
  if (i == n) return;
  double in[W] = {}, out[W];  // x and y may alias: read all before writing
  std::memcpy(in, x + i, sizeof(double) * size_t(n - i));
  VecTanh::d(in, out);
  std::memcpy(y + i, out, sizeof(double) * size_t(n - i));
}

template <class T>
void tanh_forward_loop(int64_t n, const T* x, T* y) {
  if constexpr (sizeof(T) == 4) tanh_float_loop(n, x, y);
  else tanh_double_loop(n, x, y);
}

template <class T>
void tanh_backward_loop(int64_t n, const T* y, const T* dy, T* dx) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (T(1) - y[i] * y[i]);
}

// GELU, tanh form (PyTorch's F.gelu(approximate='tanh')), written through the identity
// 0.5 (1 + tanh(z)) = 1 / (1 + exp(-2 z)): no cancellation where x < 0, and SLEEF's vector exp
// (VecTanh::expf, 1 ulp) instead of a tanh per value:
//   z = sqrt(2/pi) (x + 0.044715 x^3), s = 1 / (1 + exp(-2 z)), y = x s
//   dx = dy (s + 2 x s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 x^2))
// Chunks of kGeluChunk values: z, then exp over the chunk, then the rest. Doubles: std::exp.
constexpr double kGeluBeta = 0.7978845608028654, kGeluKappa = 0.044715;
constexpr int64_t kGeluChunk = 256;

template <class T>
inline void exp_chunk(int64_t n, T* x) {
  if constexpr (sizeof(T) == 4) {
    constexpr int64_t W = VecTanh::kF;
    int64_t i = 0;
    for (; i + W <= n; i += W) VecTanh::expf(x + i, x + i);
    if (i < n) {
      float pad[W] = {};
      std::memcpy(pad, x + i, sizeof(float) * size_t(n - i));
      VecTanh::expf(pad, pad);
      std::memcpy(x + i, pad, sizeof(float) * size_t(n - i));
    }
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
  }
}

// e[i] = exp(-2 z(x[i])) over one chunk.
template <class T>
inline void gelu_exp(int64_t n, const T* x, T* e) {
  const T beta2 = T(-2 * kGeluBeta), kappa = T(kGeluKappa);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) e[i] = beta2 * (x[i] + kappa * (x[i] * x[i] * x[i]));
  exp_chunk(n, e);
}

template <class T>
void gelu_forward_loop(int64_t n, const T* x, T* y) {
  T e[kGeluChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kGeluChunk) {
    const int64_t m = std::min(kGeluChunk, n - i0);
    gelu_exp(m, x + i0, e);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) y[i0 + i] = x[i0 + i] / (T(1) + e[i]);
  }
}

template <class T>
void gelu_backward_loop(int64_t n, const T* x, const T* dy, T* dx) {
  const T beta = T(kGeluBeta), kappa3 = T(3 * kGeluKappa);
  T e[kGeluChunk];
  for (int64_t i0 = 0; i0 < n; i0 += kGeluChunk) {
    const int64_t m = std::min(kGeluChunk, n - i0);
    gelu_exp(m, x + i0, e);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
      const T xi = x[i0 + i], s = T(1) / (T(1) + e[i]);
      dx[i0 + i] = dy[i0 + i] * (s + T(2) * xi * s * (T(1) - s) * (beta * (T(1) + kappa3 * xi * xi)));
    }
  }
}

// p[i] = T(exp(double(x[i]) - shift)), the sum of the double exps returned: eight running sums
// (lane i % 8) added pairwise at the end, as sum_sq. SLEEF's vector exp of doubles (1.0 ulp) at
// the set's width, eight values at a time; the tail through one padded group.
template <class T>
double exp_shifted_loop(int64_t n, const T* x, double shift, T* p) {
  constexpr int64_t L = 8, W = VecTanh::kD;
  double s[L] = {};
  for (int64_t i = 0; i < n; i += L) {
    const int64_t m = std::min(L, n - i);
    double a[L], e[L];
    for (int64_t l = 0; l < L; ++l) a[l] = l < m ? double(x[i + l]) - shift : -INFINITY;
    for (int64_t l = 0; l < L; l += W) VecTanh::expd(a + l, e + l);
    for (int64_t l = 0; l < L; ++l) {
      s[l] += e[l];
      if (l < m) p[i + l] = T(e[l]);
    }
  }
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// LayerNorm over rows of C values (PyTorch's nn.LayerNorm(C), biased variance):
//   mean, var of the row (summed in double, one read), rstd = 1 / sqrt(var + eps)
//   y = (x - mean) rstd w + b
template <class T>
void layernorm_forward_loop(int64_t rows, int64_t C, const T* X, const T* w, const T* b, double eps, T* Y, T* mean,
                            T* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = X + r * C;
    double s = 0, s2 = 0;
#pragma omp simd reduction(+ : s, s2)
    for (int64_t j = 0; j < C; ++j) {
      const double v = double(x[j]);
      s += v, s2 += v * v;
    }
    const double mu = s / double(C), var = std::max(s2 / double(C) - mu * mu, 0.0);
    const T m = T(mu), rs = T(1.0 / std::sqrt(var + eps));
    mean[r] = m, rstd[r] = rs;
    T* y = Y + r * C;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) y[j] = (x[j] - m) * rs * w[j] + b[j];
  }
}

// dX of the rows (written), dw and db summed onto (+=), rows in order:
//   xhat = (x - mean) rstd, g = dy w
//   dx = rstd (g - mean(g) - xhat mean(g xhat)), dw += dy xhat, db += dy
template <class T>
void layernorm_backward_loop(int64_t rows, int64_t C, const T* X, const T* w, const T* mean, const T* rstd,
                             const T* dY, T* dX, T* dw, T* db) {
  for (int64_t r = 0; r < rows; ++r) {
    const T *x = X + r * C, *dy = dY + r * C;
    const T m = mean[r], rs = rstd[r];
    T sg = 0, sgx = 0;
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < C; ++j) {
      const T xh = (x[j] - m) * rs, g = dy[j] * w[j];
      sg += g, sgx += g * xh;
      dw[j] += dy[j] * xh;
      db[j] += dy[j];
    }
    const T mg = sg / T(C), mgx = sgx / T(C);
    if (!dX) continue;
    T* dx = dX + r * C;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) dx[j] = rs * (dy[j] * w[j] - mg - (x[j] - m) * rs * mgx);
  }
}

template <class T>
void relu_forward_loop(int64_t n, const T* x, T* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
}

template <class T>
void relu_backward_loop(int64_t n, const T* y, const T* dy, T* dx) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > T(0) ? dy[i] : T(0);
}

template <class T>
void add_bias_rows_loop(int64_t M, int64_t N, const T* b, T* Y, int64_t ldy) {
  for (int64_t i = 0; i < M; ++i) {
    T* y = Y + i * ldy;
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) y[j] += b[j];
  }
}

template <class T>
void col_sums_loop(int64_t M, int64_t N, const T* X, int64_t ldx, T* out, bool accumulate) {
  T acc[kColBlock];
  for (int64_t j = 0; j < N; ++j) acc[j] = accumulate ? out[j] : T(0);
  for (int64_t i = 0; i < M; ++i) {
    const T* x = X + i * ldx;
#pragma omp simd
    for (int64_t j = 0; j < N; ++j) acc[j] += x[j];
  }
  for (int64_t j = 0; j < N; ++j) out[j] = acc[j];
}

template <class T>
double sum_sq_diff_loop(int64_t n, const T* a, const T* b) {
  constexpr int64_t L = 8;  // lanes: one AVX-512 register of doubles, two AVX2, four SSE2
  double s[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int64_t l = 0; l < L; ++l) {
      const double d = double(a[i + l]) - double(b[i + l]);
      s[l] += d * d;
    }
  for (int64_t l = 0; i < n; ++i, ++l) {
    const double d = double(a[i]) - double(b[i]);
    s[l] += d * d;
  }
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

template <class T>
double sum_sq_loop(int64_t n, const T* x) {
  constexpr int64_t L = 8;  // the lanes of sum_sq_diff_loop
  double s[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int64_t l = 0; l < L; ++l) {
      const double d = double(x[i + l]);
      s[l] += d * d;
    }
  for (int64_t l = 0; i < n; ++i, ++l) {
    const double d = double(x[i]);
    s[l] += d * d;
  }
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

template <class T>
void scaled_diff_loop(int64_t n, T s, const T* a, const T* b, T* out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = s * (a[i] - b[i]);
}

template <class T>
void axpy_loop(int64_t n, T a, const T* x, T* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

template <class T>
void scale_loop(int64_t n, T a, T* x) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

// The largest magnitude bit pattern stays below the exponent mask: an integer max, no branch per
// value, no FP flags raised.
template <class T>
bool all_finite_loop(int64_t n, const T* x) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  constexpr U kMagnitude = ~U(0) >> 1;
  constexpr U kExponent = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
  U m = 0;
#pragma omp simd reduction(max : m)
  for (int64_t i = 0; i < n; ++i) {
    U b;
    std::memcpy(&b, x + i, sizeof b);
    b &= kMagnitude;
    m = b > m ? b : m;
  }
  return m < kExponent;
}

// a * b + c rounded once, as std::fma, in every set: the Adam loops' fused multiply-adds. With
// FMA instructions (the AVX2 and AVX-512 sets) it is one. Without (the portable set) std::fma is a
// libm call per value (in software, with rounding-mode changes, on a CPU without FMA), so floats
// take a route the compiler vectorises. The product of two floats is exact in double, so
// a * b + c is one double rounding s of the exact x (TwoSum gives the error e = x - s exactly),
// and the float nearest s is the float nearest x except where s lies exactly on a midpoint
// between two floats while x does not (double rounding: s has 25 significant bits but is no
// float). There s moves one ulp of double towards x: past the midpoint, nowhere near another.
// Double operations and selects only: the vectoriser refuses integer ones next to floats.
// Non-finite inputs: e is NaN, s stays. The cost: the portable Adam loop runs at about 5 GB/s
// where it ran 36 rounding twice (bench_elementwise, one thread). Doubles keep std::fma there.
template <class T>
inline T fused_mul_add(T a, T b, T c) {
#if defined(__FMA__)
  return std::fma(a, b, c);
#else
  if constexpr (sizeof(T) == 8) {
    return std::fma(a, b, c);
  } else {
    const double p = double(a) * double(b), q = double(c);
    const double s = p + q, bq = s - p;
    const double e = (p - (s - bq)) + (q - bq);  // p + q = s + e exactly
    const double split = s * 268435457.0;        // 2^28 + 1: Veltkamp's split,
    const double hi = split - (split - s);       // s rounded to 25 bits
    // One ulp towards x: |s| 2^-53 is more than half an ulp of s (not a power of two here).
    const double toward = (e > 0.0) == (s > 0.0) ? s * 0x1p-53 : -(s * 0x1p-53);
    // Inexact, 25 bits, not a float: a midpoint. One condition, no bool variable: GCC 12 does not
    // vectorise the loop otherwise. s + -0 is s, -0 included.
    const double nudge = ((e < 0.0 || e > 0.0) && hi == s && double(float(s)) != s) ? toward : -0.0;
    return float(s + nudge);
  }
#endif
}

// Adam: the arithmetic hddp's Adam has always had, each product rounded on its own and the
// update s * (m / d), in PyTorch's order of operations (see elementwise.h). Kept as it is so
// that every result it gave stays the same bits (the tutorial's outputs among them); it is
// within an ulp or two per step of PyTorch's CPU kernels, which fuse two of the multiply-adds
// (AdamW below follows those bit for bit). Weight decay as its own instantiation so the loop
// has no branch.
template <class T, bool kDecay>
void adam_loop_impl(int64_t n, T* param, const T* grad, T* m, T* v, const AdamScalars<T>& s) {
  const T b1 = s.b1, b2 = s.b2, one_b1 = s.one_b1, one_b2 = s.one_b2, eps = s.eps, wd = s.wd;
  const T step_size = s.step_size, bc2_sqrt = s.bc2_sqrt;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T g = kDecay ? grad[i] + wd * param[i] : grad[i];
    const T mi = m[i] * b1 + one_b1 * g;
    const T vi = v[i] * b2 + one_b2 * g * g;
    m[i] = mi, v[i] = vi;
    const T denom = std::sqrt(vi) / bc2_sqrt + eps;
    param[i] -= step_size * (mi / denom);
  }
}

template <class T>
void adam_loop(int64_t n, T* param, const T* grad, T* m, T* v, const AdamScalars<T>& s) {
  if (s.wd != T(0)) adam_loop_impl<T, true>(n, param, grad, m, v, s);
  else adam_loop_impl<T, false>(n, param, grad, m, v, s);
}

// AdamW: PyTorch 1.13's single-tensor torch.optim.AdamW bit for bit, one tensor op per line, as
// its CPU kernels compute them (ATen's AVX2 and AVX-512 builds, which PyTorch runs on any CPU
// with AVX2):
//   param.mul_(1 - lr * wd)                param * decay
//   exp_avg.mul_(b1).add_(g, alpha=1-b1)   fma(g, 1 - b1, m * b1)
//   exp_avg_sq.mul_(b2).addcmul_(g, g, value=1-b2)
//                                          fma((1 - b2) * g, g, v * b2)
//   denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
//   param.addcdiv_(exp_avg, denom, value=-step_size)
//                                          param + (-step_size * m) / denom
// ATen's add-with-alpha is an explicit fmadd and its addcmul is contracted to one; its DEFAULT
// build (no FMA, ATEN_CPU_CAPABILITY=default) rounds the product first and differs in the last
// bit. Every step is rounded to T; fused_mul_add's single rounding is the same in every set.
// kDecoupled: the factor on the parameters (skipped when weight decay is 0: decay = 1 exactly
// changes nothing).
template <class T, bool kDecoupled>
void adamw_loop_impl(int64_t n, T* param, const T* grad, T* m, T* v, const AdamScalars<T>& s) {
  const T b1 = s.b1, b2 = s.b2, one_b1 = s.one_b1, one_b2 = s.one_b2, eps = s.eps;
  const T step_size = s.step_size, bc2_sqrt = s.bc2_sqrt, decay = s.decay;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T p = kDecoupled ? param[i] * decay : param[i];
    const T g = grad[i];
    const T mi = fused_mul_add(g, one_b1, m[i] * b1);
    const T vi = fused_mul_add(one_b2 * g, g, v[i] * b2);
    m[i] = mi, v[i] = vi;
    const T denom = std::sqrt(vi) / bc2_sqrt + eps;
    param[i] = p - (step_size * mi) / denom;  // p + (-s * m) / d: the same bits (rounding is symmetric)
  }
}

template <class T>
void adamw_loop(int64_t n, T* param, const T* grad, T* m, T* v, const AdamScalars<T>& s) {
  if (s.decay != T(1)) adamw_loop_impl<T, true>(n, param, grad, m, v, s);
  else adamw_loop_impl<T, false>(n, param, grad, m, v, s);
}

template <class T, bool kDecay, bool kMomentum>
void sgd_loop_impl(int64_t n, T* param, const T* grad, T* buf, const SgdScalars<T>& s) {
  const T lr = s.lr, mom = s.momentum, wd = s.wd;
  const bool first = s.first, nesterov = s.nesterov;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    T g = kDecay ? grad[i] + wd * param[i] : grad[i];
    if (kMomentum) {
      const T b = first ? g : mom * buf[i] + g;
      buf[i] = b;
      g = nesterov ? g + mom * b : b;
    }
    param[i] -= lr * g;
  }
}

template <class T>
void sgd_loop(int64_t n, T* param, const T* grad, T* buf, const SgdScalars<T>& s) {
  const bool decay = s.wd != T(0), momentum = s.momentum != T(0);
  if (decay && momentum) sgd_loop_impl<T, true, true>(n, param, grad, buf, s);
  else if (decay) sgd_loop_impl<T, true, false>(n, param, grad, buf, s);
  else if (momentum) sgd_loop_impl<T, false, true>(n, param, grad, buf, s);
  else sgd_loop_impl<T, false, false>(n, param, grad, buf, s);
}

template <class T>
EltLoops<T> make_loops() {
  return {tanh_forward_loop<T>, tanh_backward_loop<T>, relu_forward_loop<T>, relu_backward_loop<T>,
          add_bias_rows_loop<T>, col_sums_loop<T>, sum_sq_diff_loop<T>, sum_sq_loop<T>,
          scaled_diff_loop<T>, axpy_loop<T>, scale_loop<T>, all_finite_loop<T>,
          adam_loop<T>, adamw_loop<T>, sgd_loop<T>, gelu_forward_loop<T>, gelu_backward_loop<T>,
          layernorm_forward_loop<T>, layernorm_backward_loop<T>, exp_shifted_loop<T>};
}

// float -> bf16 bits, round to nearest even, NaN -> 0xFFFF (bf16.h): integer operations with
// selects, no branch, so the loop vectorises at the set's width.
inline uint32_t bf16_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7fffffffu) > 0x7f800000u ? 0xffffu : r;
}

void to_bf16_loop(int64_t n, const float* __restrict x, uint16_t* __restrict y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = uint16_t(bf16_bits(x[i]));
}

void from_bf16_loop(int64_t n, const uint16_t* __restrict x, float* __restrict y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = uint32_t(x[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    y[i] = f;
  }
}

void round_bf16_loop(int64_t n, const float* x, float* y) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = bf16_bits(x[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    y[i] = f;
  }
}

EltKernels make_elt_kernels(const char* name) {
  return {name, make_loops<float>(), make_loops<double>(), {to_bf16_loop, from_bf16_loop, round_bf16_loop}};
}

}  // namespace
}  // namespace hddp::detail
