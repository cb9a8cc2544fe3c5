// The fused attention's loops, written once and compiled once per instruction set: included
// only by attention_{portable,avx2,avx512}.cpp, each built with its own flags. Internal linkage
// throughout, so the copies never meet at link time.
//
// The including file defines first, in hddp::detail's anonymous namespace:
//   struct VecExp {                                  // SLEEF's exp at the set's width
//     static void f(int64_t n, float* x);            // x = exp(x), n a multiple of 16
//     static void d(int64_t n, double* x);           // the same for doubles
//   };
// and then calls make_attn_kernels(name).
//
// One task is a block of queries (forward) or one head (backward). Every block of scores is
// kAttnBlock wide whatever the keys left, so the vector loops have a constant trip count; the
// columns past the causal limit are set to -inf before the exp (0 after it) and skipped by the
// products with V, K and Q.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <hddp/kernels/attention/attention_blocking.h>
#include <hddp/kernels/attention/attention_ukernel.h>

namespace hddp::detail {
namespace {

constexpr int64_t Bk = kAttnBlock;

template <class T>
void vexp(int64_t n, T* x) {
  if constexpr (sizeof(T) == 4) VecExp::f(n, x);
  else VecExp::d(n, x);
}

// Per-thread work space, grown once to the largest head size seen.
template <class T>
struct AttnScratch {
  std::vector<T> kt, vt, s, dp, o, m, l, rowd;
  void fit(int64_t D, int64_t T_) {
    if (int64_t(kt.size()) < D * Bk) kt.assign(size_t(D * Bk), T(0)), vt.assign(size_t(D * Bk), T(0));
    if (int64_t(o.size()) < Bk * D) o.assign(size_t(Bk * D), T(0));
    if (s.empty()) s.assign(size_t(Bk), T(0)), dp.assign(size_t(Bk), T(0)), m.assign(size_t(Bk), T(0)), l.assign(size_t(Bk), T(0));
    if (int64_t(rowd.size()) < T_) rowd.assign(size_t(T_), T(0));
  }
};
template <class T>
AttnScratch<T>& scratch() {
  static thread_local AttnScratch<T> w;
  return w;
}

// kt(D x Bk) = rows [j0, j0 + nk) of X (row stride ld), D values each, transposed.
template <class T>
inline void transpose_block(const T* X, int64_t ld, int64_t j0, int64_t nk, int64_t D, T* kt) {
  for (int64_t c = 0; c < nk; ++c) {
    const T* x = X + (j0 + c) * ld;
    for (int64_t d = 0; d < D; ++d) kt[d * Bk + c] = x[d];
  }
}

// row(Bk) = a(D) . kt(D x Bk), a scaled by `scale`.
template <class T>
inline void row_times_block(const T* a, T scale, const T* kt, int64_t D, T* row) {
  T acc[Bk] = {};
  for (int64_t d = 0; d < D; ++d) {
    const T ad = a[d] * scale;
    const T* k = kt + d * Bk;
#pragma omp simd
    for (int64_t c = 0; c < Bk; ++c) acc[c] += ad * k[c];
  }
#pragma omp simd
  for (int64_t c = 0; c < Bk; ++c) row[c] = acc[c];
}

template <class T>
inline void axpy_d(int64_t D, T a, const T* x, T* y) {
#pragma omp simd
  for (int64_t d = 0; d < D; ++d) y[d] += a * x[d];
}

template <class T>
void forward_task(const AttentionShape& sh, int64_t b, int64_t h, int64_t q0, int64_t q1, const T* qkv, T* out,
                  T* lse) {
  const int64_t T_ = sh.T, C = sh.C, D = sh.D(), ld = 3 * C, nq = q1 - q0;
  const T scale = T(1.0 / std::sqrt(double(D)));
  const T ninf = -std::numeric_limits<T>::infinity();
  const T* Q = qkv + b * T_ * ld + h * D;
  const T* K = Q + C;
  const T* V = Q + 2 * C;
  AttnScratch<T>& w = scratch<T>();
  w.fit(D, T_);
  T *kt = w.kt.data(), *s = w.s.data(), *o = w.o.data(), *m = w.m.data(), *l = w.l.data();
  std::fill(o, o + nq * D, T(0));
  std::fill(m, m + nq, ninf);
  std::fill(l, l + nq, T(0));
  for (int64_t j0 = 0; j0 < q1; j0 += Bk) {
    const int64_t nk = std::min(Bk, q1 - j0);  // keys past the block's last query are masked for all
    transpose_block(K, ld, j0, nk, D, kt);
    for (int64_t r = 0; r < nq; ++r) {
      const int64_t last = std::min(nk - 1, q0 + r - j0);  // the row's last visible key in the block
      if (last < 0) continue;
      row_times_block(Q + (q0 + r) * ld, scale, kt, D, s);
      T mx = m[r];
      for (int64_t c = 0; c <= last; ++c) mx = std::max(mx, s[c]);
#pragma omp simd
      for (int64_t c = 0; c < Bk; ++c) s[c] = c <= last ? s[c] - mx : ninf;
      vexp(Bk, s);
      T sum = 0;
      for (int64_t c = 0; c <= last; ++c) sum += s[c];
      const T alpha = std::exp(m[r] - mx);  // 0 on the first block (m = -inf)
      l[r] = l[r] * alpha + sum;
      m[r] = mx;
      T* orow = o + r * D;
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) orow[d] *= alpha;
      for (int64_t c = 0; c <= last; ++c) axpy_d(D, s[c], V + (j0 + c) * ld, orow);
    }
  }
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t t = q0 + r;
    const T inv = T(1) / l[r];
    T* y = out + (b * T_ + t) * C + h * D;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) y[d] = o[r * D + d] * inv;
    lse[(b * sh.H + h) * T_ + t] = m[r] + std::log(l[r]);
  }
}

// FlashAttention's backward for one head: key blocks outer, the query blocks that see them
// inner; P recomputed from lse, dS = P (dP - rowsum(dO o O)); dQ, dK, dV summed in that fixed order.
template <class T>
void backward_task(const AttentionShape& sh, int64_t b, int64_t h, const T* qkv, const T* out, const T* lse,
                   const T* dout, T* dqkv) {
  const int64_t T_ = sh.T, C = sh.C, D = sh.D(), ld = 3 * C;
  const T scale = T(1.0 / std::sqrt(double(D)));
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t off = b * T_ * ld + h * D;
  const T *Q = qkv + off, *K = Q + C, *V = Q + 2 * C;
  T *dQ = dqkv + off, *dK = dQ + C, *dV = dQ + 2 * C;
  const T* L = lse + (b * sh.H + h) * T_;
  AttnScratch<T>& w = scratch<T>();
  w.fit(D, T_);
  T *kt = w.kt.data(), *vt = w.vt.data(), *p = w.s.data(), *dp = w.dp.data(), *rowd = w.rowd.data();
  for (int64_t t = 0; t < T_; ++t) {
    const T* y = out + (b * T_ + t) * C + h * D;
    const T* dy = dout + (b * T_ + t) * C + h * D;
    T acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += dy[d] * y[d];
    rowd[t] = acc;
    std::fill(dQ + t * ld, dQ + t * ld + D, T(0));
    std::fill(dK + t * ld, dK + t * ld + D, T(0));
    std::fill(dV + t * ld, dV + t * ld + D, T(0));
  }
  for (int64_t j0 = 0; j0 < T_; j0 += Bk) {
    const int64_t nk = std::min(Bk, T_ - j0);
    transpose_block(K, ld, j0, nk, D, kt);
    transpose_block(V, ld, j0, nk, D, vt);
    for (int64_t i = j0; i < T_; ++i) {  // the queries that see a key of the block
      const int64_t last = std::min(nk - 1, i - j0);
      const T* q = Q + i * ld;
      const T* dy = dout + (b * T_ + i) * C + h * D;
      row_times_block(q, scale, kt, D, p);
      const T li = L[i];
#pragma omp simd
      for (int64_t c = 0; c < Bk; ++c) p[c] = c <= last ? p[c] - li : ninf;
      vexp(Bk, p);
      row_times_block(dy, T(1), vt, D, dp);
      const T di = rowd[i];
      T* dq = dQ + i * ld;
      for (int64_t c = 0; c <= last; ++c) {
        const T ds = p[c] * (dp[c] - di) * scale;
        axpy_d(D, p[c], dy, dV + (j0 + c) * ld);
        axpy_d(D, ds, q, dK + (j0 + c) * ld);
        axpy_d(D, ds, K + (j0 + c) * ld, dq);
      }
    }
  }
}

AttnKernels make_attn_kernels(const char* name) {
  return {name, {forward_task<float>, backward_task<float>}, {forward_task<double>, backward_task<double>}};
}

}  // namespace
}  // namespace hddp::detail
