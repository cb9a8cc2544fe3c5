// The fused attention's loops, written once and compiled once per instruction set: included
// only by attention_{portable,avx2,avx512}.cpp, each built with its own flags. Internal linkage
// throughout, so the copies never meet at link time.
//
// The including file defines first, in hddp::detail's anonymous namespace:
//   struct VecExp {                                  // SLEEF's exp at the set's width
//     static constexpr int kLanes;                   // floats per vector register
//     static void f(int64_t n, float* x);            // x = exp(x), n a multiple of 16
//     static void d(int64_t n, double* x);           // the same for doubles
//   };
// and then calls make_attn_kernels(name).
//
// Floats go through register-blocked micro-kernels (GCC vector extensions at the set's width,
// as gemm_small.h): kRows query rows at a time, so each key or value row loaded from L1 feeds
// kRows rows of products. Doubles (the tests' finite differences) take plain row loops.
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
constexpr int kRows = 4;  // query rows per group of the float micro-kernels

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
    // A group of kRows rows may run past the block's last row (repeated rows): room for them.
    if (int64_t(o.size()) < (Bk + kRows) * D) o.assign(size_t((Bk + kRows) * D), T(0));
    if (s.empty()) {
      s.assign(size_t(kRows * Bk), T(0)), dp.assign(size_t(kRows * Bk), T(0));
      m.assign(size_t(Bk + kRows), T(0)), l.assign(size_t(Bk + kRows), T(0));
    }
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

// ---- float micro-kernels ----------------------------------------------------------------
constexpr int kL = VecExp::kLanes;       // floats per vector
constexpr int kNV = 4;                   // vectors per row of accumulators: kRows x kNV registers
using VF = float __attribute__((vector_size(kL * 4)));

inline VF vload(const float* p) {
  VF v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void vstore(float* p, VF v) { __builtin_memcpy(p, &v, sizeof v); }

// s[r][0, Bk) = scale * a_r(D) . bt(D x Bk), r < kRows (a[r]: a row pointer each).
inline void scores_rows(const float* const* a, float scale, const float* bt, int64_t D, float* s) {
  for (int64_t c0 = 0; c0 < Bk; c0 += kNV * kL) {
    VF acc[kRows][kNV] = {};
    for (int64_t d = 0; d < D; ++d) {
      const float* b = bt + d * Bk + c0;
      VF bv[kNV];
#pragma GCC unroll 4
      for (int j = 0; j < kNV; ++j) bv[j] = vload(b + j * kL);
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const float x = a[r][d] * scale;
#pragma GCC unroll 4
        for (int j = 0; j < kNV; ++j) acc[r][j] += x * bv[j];
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int j = 0; j < kNV; ++j) vstore(s + r * Bk + c0 + j * kL, acc[r][j]);
  }
}

// o_r(D) += sum_{c <= last} p[r][c] x_c(D), r < kRows; x_c = x + c * ld; o_r = o[r] (row pointers).
// J vectors of columns at a time, then a plain loop over D's last D % kL columns.
template <int J>
inline void gather_chunk(float* const* o, const float* p, const float* x, int64_t ld, int64_t last, int64_t d0) {
  VF acc[kRows][J];
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < J; ++j) acc[r][j] = vload(o[r] + d0 + j * kL);
  for (int64_t c = 0; c <= last; ++c) {
    VF xv[J];
    for (int j = 0; j < J; ++j) xv[j] = vload(x + c * ld + d0 + j * kL);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const float w = p[r * Bk + c];
      for (int j = 0; j < J; ++j) acc[r][j] += w * xv[j];
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < J; ++j) vstore(o[r] + d0 + j * kL, acc[r][j]);
}
inline void gather_rows(float* const* o, const float* p, const float* x, int64_t ld, int64_t last, int64_t D) {
  int64_t d0 = 0;
  for (; d0 + 4 * kL <= D; d0 += 4 * kL) gather_chunk<4>(o, p, x, ld, last, d0);
  if (D - d0 >= 3 * kL) gather_chunk<3>(o, p, x, ld, last, d0), d0 += 3 * kL;
  if (D - d0 >= 2 * kL) gather_chunk<2>(o, p, x, ld, last, d0), d0 += 2 * kL;
  if (D - d0 >= kL) gather_chunk<1>(o, p, x, ld, last, d0), d0 += kL;
  for (int r = 0; r < kRows; ++r)
    for (int64_t c = 0; c <= last; ++c)
      for (int64_t d = d0; d < D; ++d) o[r][d] += p[r * Bk + c] * x[c * ld + d];
}

// y_c(D) += sum_r w[r][c] x_r(D) for c <= last; y_c = y + c * ld, x_r = x[r] (row pointers).
template <int J>
inline void scatter_chunk(float* y, int64_t ld, const float* w, const float* const* x, int64_t last, int64_t d0) {
  VF xv[kRows][J];
  for (int r = 0; r < kRows; ++r)
    for (int j = 0; j < J; ++j) xv[r][j] = vload(x[r] + d0 + j * kL);
  for (int64_t c = 0; c <= last; ++c) {
    float* yc = y + c * ld + d0;
    VF acc[J];
    for (int j = 0; j < J; ++j) acc[j] = vload(yc + j * kL);
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const float a = w[r * Bk + c];
      for (int j = 0; j < J; ++j) acc[j] += a * xv[r][j];
    }
    for (int j = 0; j < J; ++j) vstore(yc + j * kL, acc[j]);
  }
}
inline void scatter_rows(float* y, int64_t ld, const float* w, const float* const* x, int64_t last, int64_t D) {
  int64_t d0 = 0;
  for (; d0 + 4 * kL <= D; d0 += 4 * kL) scatter_chunk<4>(y, ld, w, x, last, d0);
  if (D - d0 >= 3 * kL) scatter_chunk<3>(y, ld, w, x, last, d0), d0 += 3 * kL;
  if (D - d0 >= 2 * kL) scatter_chunk<2>(y, ld, w, x, last, d0), d0 += 2 * kL;
  if (D - d0 >= kL) scatter_chunk<1>(y, ld, w, x, last, d0), d0 += kL;
  for (int64_t c = 0; c <= last; ++c)
    for (int r = 0; r < kRows; ++r)
      for (int64_t d = d0; d < D; ++d) y[c * ld + d] += w[r * Bk + c] * x[r][d];
}

// Forward of one query block in float: groups of kRows rows (a short last group repeats its last
// row, whose copies are never stored).
void forward_task_f(const AttentionShape& sh, int64_t b, int64_t h, int64_t q0, int64_t q1, const float* qkv,
                    float* out, float* lse) {
  const int64_t T_ = sh.T, C = sh.C, D = sh.D(), ld = 3 * C, nq = q1 - q0;
  const float scale = float(1.0 / std::sqrt(double(D)));
  const float ninf = -std::numeric_limits<float>::infinity();
  const float* Q = qkv + b * T_ * ld + h * D;
  const float* K = Q + C;
  const float* V = Q + 2 * C;
  AttnScratch<float>& w = scratch<float>();
  w.fit(D, T_);
  float *kt = w.kt.data(), *s = w.s.data(), *o = w.o.data(), *m = w.m.data(), *l = w.l.data();
  std::fill(o, o + (nq + kRows) * D, 0.0f);
  std::fill(m, m + nq + kRows, ninf);
  std::fill(l, l + nq + kRows, 0.0f);
  for (int64_t j0 = 0; j0 < q1; j0 += Bk) {
    const int64_t nk = std::min(Bk, q1 - j0);
    transpose_block(K, ld, j0, nk, D, kt);
    for (int64_t r0 = 0; r0 < nq; r0 += kRows) {
      const float* qr[kRows];
      float* orow[kRows];
      int64_t last[kRows], lastmax = 0;
      for (int r = 0; r < kRows; ++r) {
        const int64_t rr = std::min(r0 + r, nq - 1);
        qr[r] = Q + (q0 + rr) * ld;
        orow[r] = o + (r0 + r) * D;
        last[r] = std::min(nk - 1, q0 + rr - j0);
        lastmax = std::max(lastmax, last[r]);
      }
      scores_rows(qr, scale, kt, D, s);
      for (int r = 0; r < kRows; ++r) {
        float* sr = s + r * Bk;
        float mx = m[r0 + r];
        for (int64_t c = 0; c <= last[r]; ++c) mx = std::max(mx, sr[c]);
#pragma omp simd
        for (int64_t c = 0; c < Bk; ++c) sr[c] = c <= last[r] ? sr[c] - mx : ninf;
        const float alpha = std::exp(m[r0 + r] - mx);
        m[r0 + r] = mx;
        l[r0 + r] *= alpha;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d) orow[r][d] *= alpha;
      }
      vexp(kRows * Bk, s);
      for (int r = 0; r < kRows; ++r) {
        float sum = 0;
        for (int64_t c = 0; c <= last[r]; ++c) sum += s[r * Bk + c];
        l[r0 + r] += sum;
      }
      gather_rows(orow, s, V + j0 * ld, ld, lastmax, D);
    }
  }
  for (int64_t r = 0; r < nq; ++r) {
    const int64_t t = q0 + r;
    const float inv = 1.0f / l[r];
    float* y = out + (b * T_ + t) * C + h * D;
#pragma omp simd
    for (int64_t d = 0; d < D; ++d) y[d] = o[r * D + d] * inv;
    lse[(b * sh.H + h) * T_ + t] = m[r] + std::log(l[r]);
  }
}

// Backward of one head in float, the order of backward_task with kRows query rows at a time.
void backward_task_f(const AttentionShape& sh, int64_t b, int64_t h, const float* qkv, const float* out,
                     const float* lse, const float* dout, float* dqkv) {
  const int64_t T_ = sh.T, C = sh.C, D = sh.D(), ld = 3 * C;
  const float scale = float(1.0 / std::sqrt(double(D)));
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t off = b * T_ * ld + h * D;
  const float *Q = qkv + off, *K = Q + C, *V = Q + 2 * C;
  float *dQ = dqkv + off, *dK = dQ + C, *dV = dQ + 2 * C;
  const float* L = lse + (b * sh.H + h) * T_;
  AttnScratch<float>& w = scratch<float>();
  w.fit(D, T_);
  float *kt = w.kt.data(), *vt = w.vt.data(), *p = w.s.data(), *dp = w.dp.data(), *rowd = w.rowd.data();
  float* sink = w.o.data();  // dQ rows of a short group's repeated row go here
  for (int64_t t = 0; t < T_; ++t) {
    const float* y = out + (b * T_ + t) * C + h * D;
    const float* dy = dout + (b * T_ + t) * C + h * D;
    float acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += dy[d] * y[d];
    rowd[t] = acc;
    std::fill(dQ + t * ld, dQ + t * ld + D, 0.0f);
    std::fill(dK + t * ld, dK + t * ld + D, 0.0f);
    std::fill(dV + t * ld, dV + t * ld + D, 0.0f);
  }
  for (int64_t j0 = 0; j0 < T_; j0 += Bk) {
    const int64_t nk = std::min(Bk, T_ - j0);
    transpose_block(K, ld, j0, nk, D, kt);
    transpose_block(V, ld, j0, nk, D, vt);
    for (int64_t i0 = j0; i0 < T_; i0 += kRows) {
      const float *qr[kRows], *dyr[kRows];
      float* dqr[kRows];
      int64_t last[kRows], lastmax = 0;
      for (int r = 0; r < kRows; ++r) {
        const bool real = i0 + r < T_;
        const int64_t i = real ? i0 + r : T_ - 1;
        qr[r] = Q + i * ld, dyr[r] = dout + (b * T_ + i) * C + h * D;
        dqr[r] = real ? dQ + i * ld : sink;
        last[r] = real ? std::min(nk - 1, i - j0) : -1;  // a repeated row adds nothing
        lastmax = std::max(lastmax, last[r]);
      }
      scores_rows(qr, scale, kt, D, p);
      scores_rows(dyr, 1.0f, vt, D, dp);
      for (int r = 0; r < kRows; ++r) {
        const float li = last[r] >= 0 ? L[i0 + r] : 0.0f;
        float* pr = p + r * Bk;
#pragma omp simd
        for (int64_t c = 0; c < Bk; ++c) pr[c] = c <= last[r] ? pr[c] - li : ninf;
      }
      vexp(kRows * Bk, p);
      for (int r = 0; r < kRows; ++r) {  // dp becomes dS = P (dP - D_i) scale
        const float di = last[r] >= 0 ? rowd[i0 + r] : 0.0f;
        float *pr = p + r * Bk, *dr = dp + r * Bk;
#pragma omp simd
        for (int64_t c = 0; c < Bk; ++c) dr[c] = pr[c] * (dr[c] - di) * scale;
      }
      scatter_rows(dV + j0 * ld, ld, p, dyr, lastmax, D);
      scatter_rows(dK + j0 * ld, ld, dp, qr, lastmax, D);
      gather_rows(dqr, dp, K + j0 * ld, ld, lastmax, D);
    }
  }
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
  return {name, {forward_task_f, backward_task_f}, {forward_task<double>, backward_task<double>}};
}

}  // namespace
}  // namespace hddp::detail
