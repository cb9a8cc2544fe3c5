#pragma once
// Direct path for small GEMMs, from the tutorial's (32x1)(1x20) and (32x20)(20x1) up to 64^3:
// one operand (P) is streamed row by row, in place where its rows are contiguous, else from a
// small zero-padded stack copy; the other (X) is broadcast element by element; C is written
// once. No threads, no heap, no packing: tens of nanoseconds for the tutorial's products.
//
// Included by each micro-kernel file inside its own namespace (HDDP_ISA), so the same loops
// are compiled once per instruction set without ODR clashes, with that set's register width
// HDDP_SMALL_VEC_BYTES (32 unless defined: 64 for AVX-512). The loops are plain C++ with
// GCC vector extensions: W columns of P (up to two registers) times RB rows in registers.
#include <algorithm>
#include <cstdint>

#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_blocking.h>

#ifndef HDDP_ISA
#error "define HDDP_ISA (the namespace for this instruction set) before including gemm_small.h"
#endif
#ifndef HDDP_SMALL_VEC_BYTES
#define HDDP_SMALL_VEC_BYTES 32
#endif

namespace hddp::detail::HDDP_ISA {

// Canonical form: out(r, c) = sum_k X(r, k) * P[k*ldp + c], for r < R, c < Cn;
// X(r, k) = X[r*rsx + k*csx]; out(r, c) lives at C[r*rsc + c*csc].
template <class T>
struct SmallProblem {
  int64_t R, Cn, K;
  const T* X;
  int64_t rsx, csx;
  const T* P;
  int64_t ldp;
  T alpha, beta;
  T* C;
  int64_t rsc, csc;
};

// GCC/Clang vector extensions: Lanes elements of T. Without AVX the compiler lowers a 256-bit
// one to two SSE registers, so the same source serves every instruction set.
template <class T, int Lanes>
struct Simd {
  static constexpr int V = Lanes;
  typedef T vec __attribute__((vector_size(Lanes * sizeof(T))));
  typedef T uvec __attribute__((vector_size(Lanes * sizeof(T)), aligned(alignof(T))));  // unaligned
};

// RB rows x (NV registers of L lanes + one register of QL lanes, QL = 0: none) starting at
// (r0, c0); cn of those columns are valid. One broadcast of X feeds every register of a row.
template <int RB, int NV, int L, int QL, class T>
inline void small_block(const SmallProblem<T>& p, int64_t r0, int64_t c0, int64_t cn) {
  using vec = typename Simd<T, L>::vec;
  using uvec = typename Simd<T, L>::uvec;
  using qvec = typename Simd<T, QL ? QL : L>::vec;
  using quvec = typename Simd<T, QL ? QL : L>::uvec;
  constexpr int W = NV * L + QL;
  vec acc[RB][NV ? NV : 1];
  qvec qacc[RB];
  for (int r = 0; r < RB; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = vec{};
    qacc[r] = qvec{};
  }
  const T* x = p.X + r0 * p.rsx;
  for (int64_t k = 0; k < p.K; ++k) {
    const T* pk = p.P + k * p.ldp + c0;
    vec b[NV ? NV : 1];
    for (int v = 0; v < NV; ++v) b[v] = *reinterpret_cast<const uvec*>(pk + v * L);
    qvec q{};
    if constexpr (QL > 0) q = *reinterpret_cast<const quvec*>(pk + NV * L);
    for (int r = 0; r < RB; ++r) {
      const T xr = x[r * p.rsx + k * p.csx];
      for (int v = 0; v < NV; ++v) acc[r][v] += xr * b[v];
      if constexpr (QL > 0) qacc[r] += xr * q;
    }
  }
  // Locals: stores into C (a T*) could otherwise alias p.alpha and p.beta.
  const T alpha = p.alpha, beta = p.beta;
  const int64_t rsc = p.rsc, csc = p.csc;
  if (csc == 1 && cn == W) {  // whole registers straight into C
    for (int r = 0; r < RB; ++r) {
      T* c = p.C + (r0 + r) * rsc + c0;
      for (int v = 0; v < NV; ++v) {
        uvec& cv = *reinterpret_cast<uvec*>(c + v * L);
        cv = beta == T(0) ? alpha * acc[r][v] : alpha * acc[r][v] + beta * cv;
      }
      if constexpr (QL > 0) {
        quvec& cq = *reinterpret_cast<quvec*>(c + NV * L);
        cq = beta == T(0) ? alpha * qacc[r] : alpha * qacc[r] + beta * cq;
      }
    }
    return;
  }
  // Edge chunk or strided C (transposed orientation): through a tile, element by element.
  alignas(64) T tile[RB][W];
  for (int r = 0; r < RB; ++r) {
    for (int v = 0; v < NV; ++v)
      for (int l = 0; l < L; ++l) tile[r][v * L + l] = alpha * acc[r][v][l];
    if constexpr (QL > 0)
      for (int l = 0; l < QL; ++l) tile[r][NV * L + l] = alpha * qacc[r][l];
  }
  T* c = p.C + r0 * rsc + c0 * csc;
  for (int r = 0; r < RB; ++r)
    for (int64_t w = 0; w < cn; ++w) {
      T& cw = c[r * rsc + w * csc];
      cw = beta == T(0) ? tile[r][w] : tile[r][w] + beta * cw;
    }
}

// All rows for one column chunk (NV registers of L lanes + QL lanes), RB rows at a time, the
// remainder with fewer rows.
template <int RB, int NV, int L, int QL = 0, class T>
inline void small_chunk(const SmallProblem<T>& p, int64_t c0) {
  const int64_t cn = std::min<int64_t>(NV * L + QL, p.Cn - c0);
  int64_t r = 0;
  for (; r + RB <= p.R; r += RB) small_block<RB, NV, L, QL>(p, r, c0, cn);
  switch (p.R - r) {
    case 11: if constexpr (RB > 11) small_block<11, NV, L, QL>(p, r, c0, cn); break;
    case 10: if constexpr (RB > 10) small_block<10, NV, L, QL>(p, r, c0, cn); break;
    case 9: if constexpr (RB > 9) small_block<9, NV, L, QL>(p, r, c0, cn); break;
    case 8: if constexpr (RB > 8) small_block<8, NV, L, QL>(p, r, c0, cn); break;
    case 7: if constexpr (RB > 7) small_block<7, NV, L, QL>(p, r, c0, cn); break;
    case 6: if constexpr (RB > 6) small_block<6, NV, L, QL>(p, r, c0, cn); break;
    case 5: if constexpr (RB > 5) small_block<5, NV, L, QL>(p, r, c0, cn); break;
    case 4: if constexpr (RB > 4) small_block<4, NV, L, QL>(p, r, c0, cn); break;
    case 3: small_block<3, NV, L, QL>(p, r, c0, cn); break;
    case 2: small_block<2, NV, L, QL>(p, r, c0, cn); break;
    case 1: small_block<1, NV, L, QL>(p, r, c0, cn); break;
    default: break;
  }
}

// K == 1: C = alpha * a b^T + beta * C, an outer product (the tutorial's Linear(1, 20)
// forward and its input gradient). b is read in place when contiguous. Up to 4 registers of b
// (NB of V lanes, HALF: one of V/2, then scalars) stay in registers for every row of C.
template <int NB, bool HALF, class T>
inline void small_outer_fixed(int64_t M, int64_t N, T alpha, const T* a, int64_t inca,
                              const T* __restrict b, T beta, T* __restrict C, int64_t ldc) {
  constexpr int V = 32 / sizeof(T), H = V / 2;  // 256 bits: short rows, stores dominate
  using VF = typename Simd<T, V>::vec;
  using VFu = typename Simd<T, V>::uvec;
  using VH = typename Simd<T, H>::vec;
  using VHu = typename Simd<T, H>::uvec;
  VF bv[NB ? NB : 1];
  for (int v = 0; v < NB; ++v) bv[v] = *reinterpret_cast<const VFu*>(b + v * V);
  VH bh{};
  if constexpr (HALF) bh = *reinterpret_cast<const VHu*>(b + NB * V);
  constexpr int64_t done = NB * V + (HALF ? H : 0);
  for (int64_t i = 0; i < M; ++i) {
    const T ai = alpha * a[i * inca];
    T* c = C + i * ldc;
    for (int v = 0; v < NB; ++v) {
      VFu& cv = *reinterpret_cast<VFu*>(c + v * V);
      cv = beta == T(0) ? ai * bv[v] : ai * bv[v] + beta * cv;
    }
    if constexpr (HALF) {
      VHu& ch = *reinterpret_cast<VHu*>(c + NB * V);
      ch = beta == T(0) ? ai * bh : ai * bh + beta * ch;
    }
#pragma GCC unroll 1
    for (int64_t j = done; j < N; ++j) c[j] = beta == T(0) ? ai * b[j] : ai * b[j] + beta * c[j];
  }
}

template <class T>
inline void small_outer(int64_t M, int64_t N, T alpha, const T* a, int64_t inca, const T* b,
                        T beta, T* C, int64_t ldc) {
  constexpr int V = 32 / sizeof(T), H = V / 2;
  const int64_t nb = N / V;
  const bool half = N % V >= H;
  switch (nb > 4 ? -1 : int(nb) * 2 + half) {
    case 0: return small_outer_fixed<0, false>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 1: return small_outer_fixed<0, true>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 2: return small_outer_fixed<1, false>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 3: return small_outer_fixed<1, true>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 4: return small_outer_fixed<2, false>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 5: return small_outer_fixed<2, true>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 6: return small_outer_fixed<3, false>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 7: return small_outer_fixed<3, true>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 8: return small_outer_fixed<4, false>(M, N, alpha, a, inca, b, beta, C, ldc);
    case 9: return small_outer_fixed<4, true>(M, N, alpha, a, inca, b, beta, C, ldc);
    default:  // wide rows: whole registers from memory
      for (int64_t i = 0; i < M; ++i) {
        const T ai = alpha * a[i * inca];
        T* c = C + i * ldc;
#pragma GCC unroll 1
        for (int64_t j = 0; j < N; ++j) c[j] = beta == T(0) ? ai * b[j] : ai * b[j] + beta * c[j];
      }
  }
}

// N == 1 with rows of A contiguous: C(i) = alpha * dot(A_i, b) + beta * C(i) (the tutorial's
// Linear(20, 1) forward). Four rows at a time for independent accumulators.
template <class T>
inline void small_dot(int64_t M, int64_t K, T alpha, const T* A, int64_t lda, const T* b,
                      T beta, T* C, int64_t ldc) {
  constexpr int V = 32 / sizeof(T);  // 256 bits: K is short, a wider sum costs more to reduce
  using VT = typename Simd<T, V>::uvec;
  using VA = typename Simd<T, V>::vec;
  auto hsum = [](VA v) {
    T s = 0;
    for (int l = 0; l < V; ++l) s += v[l];
    return s;
  };
  int64_t i = 0;
  for (; i + 4 <= M; i += 4) {
    const T* a = A + i * lda;
    VA s0{}, s1{}, s2{}, s3{};
    int64_t k = 0;
    for (; k + V <= K; k += V) {
      const VA bk = *reinterpret_cast<const VT*>(b + k);
      s0 += *reinterpret_cast<const VT*>(a + k) * bk;
      s1 += *reinterpret_cast<const VT*>(a + lda + k) * bk;
      s2 += *reinterpret_cast<const VT*>(a + 2 * lda + k) * bk;
      s3 += *reinterpret_cast<const VT*>(a + 3 * lda + k) * bk;
    }
    T d[4] = {hsum(s0), hsum(s1), hsum(s2), hsum(s3)};
    for (; k < K; ++k)
      for (int r = 0; r < 4; ++r) d[r] += a[r * lda + k] * b[k];
    for (int r = 0; r < 4; ++r) {
      T& c = C[(i + r) * ldc];
      c = beta == T(0) ? alpha * d[r] : alpha * d[r] + beta * c;
    }
  }
  for (; i < M; ++i) {
    T d = 0;
    for (int64_t k = 0; k < K; ++k) d += A[i * lda + k] * b[k];
    T& c = C[i * ldc];
    c = beta == T(0) ? alpha * d : alpha * d + beta * c;
  }
}

// The direct path: returns false, doing nothing, when the product is too big for it (the
// caller then runs the blocked path); else computes it (full gemm contract after the
// argument checks and the M/N/K/alpha special cases).
// How the columns past the last two-register chunk are covered: up to one register of V
// lanes plus one narrower one (H: half, Q: 128 bits), or two registers; `width` is how many
// columns that pass reads (>= rest, so panel rows are padded to it).
enum class Tail { None, V, VQ, VH, VV, Q, H };
struct TailPlan {
  Tail kind;
  int64_t width;
};
template <int V, int H, int Q>
constexpr TailPlan plan_tail(int64_t rest) {
  if (rest == 0) return {Tail::None, 0};
  if (rest >= V) {
    const int64_t t = rest - V;
    if (t == 0) return {Tail::V, V};
    if (t <= Q) return {Tail::VQ, V + Q};
    if (t <= H) return {Tail::VH, V + H};
    return {Tail::VV, 2 * V};
  }
  if (rest <= Q) return {Tail::Q, Q};
  if (rest <= H) return {Tail::H, H};
  return {Tail::V, V};
}

// Every column chunk of P: two-register chunks RB2 rows at a time, the tail (plan_tail) RB1 rows
// at a time.
template <int RB2, int RB1, class T>
inline void small_passes(const SmallProblem<T>& p, int64_t c_tail, Tail tail) {
  constexpr int V = HDDP_SMALL_VEC_BYTES / sizeof(T), H = V / 2, Q = V * sizeof(T) == 64 ? V / 4 : H;
  for (int64_t c0 = 0; c0 < c_tail; c0 += 2 * V) small_chunk<RB2, 2, V>(p, c0);
  switch (tail) {
    case Tail::None: break;
    case Tail::V: small_chunk<RB1, 1, V>(p, c_tail); break;
    case Tail::VQ: small_chunk<RB1, 1, V, Q>(p, c_tail); break;
    case Tail::VH: small_chunk<RB1, 1, V, H>(p, c_tail); break;
    case Tail::VV: small_chunk<RB2, 2, V>(p, c_tail); break;
    case Tail::Q: small_chunk<RB1, 0, V, Q>(p, c_tail); break;
    case Tail::H: small_chunk<RB1, 0, V, H>(p, c_tail); break;
  }
}

// The direct path: returns false, doing nothing, when the product is too big for it (the
// caller then runs the blocked path); else computes it (full gemm contract after the
// argument checks and the M/N/K/alpha special cases).
template <class T>
bool gemm_small(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  constexpr int V = HDDP_SMALL_VEC_BYTES / sizeof(T);  // elements per register
  constexpr int H = V / 2;                             // half a register
  constexpr int Q = V * sizeof(T) == 64 ? V / 4 : H;   // the narrowest: 128 bits
  // Orientation: columns of the canonical form run along C's rows (contiguous stores)
  // unless N is tiny and M is not; then compute C^T = op(B)^T op(A)^T instead.
  const bool transposed = N < V && M > N;
  const int64_t cols = transposed ? M : N;
  // Columns in chunks of two registers, then one pass over the rest (plan_tail).
  const int64_t c_tail = cols / (2 * V) * (2 * V);
  const TailPlan tail = plan_tail<V, H, Q>(cols - c_tail);
  const int64_t ldp = c_tail + tail.width;  // columns read per row of P
  // P is the operand itself where its rows are stored contiguously and the passes read exactly
  // `cols` of them; else a copy in `panel`, which must fit.
  const bool rows_contiguous = transposed ? ta == Trans::Yes : tb == Trans::No;
  const bool in_place = rows_contiguous && ldp == cols;
  const int64_t copied = K == 1 ? (tb == Trans::Yes && ldb != 1 ? N : 0)
                       : N == 1 && ta == Trans::No ? (tb == Trans::No && ldb != 1 ? K : 0)
                       : in_place ? 0 : K * ldp;
  // Long K with a small C (a first convolution's weight gradient, 32 x 9 over K = 50176): no
  // packing at any K where P is read in place; the rows of C's canonical form in blocks of
  // kLongRows (all 9 at once with 512-bit registers), so P streams once per column chunk.
  constexpr int kLongRows = V * sizeof(T) == 64 ? 12 : 6;  // 2 registers a row: 24 (12) accumulators
  const bool long_k = M * N * K > kSmallMaxMNK && M * N <= kSmallMaxMN && in_place && K > 1 &&
                      !(N == 1 && ta == Trans::No);
  if ((M * N * K > kSmallMaxMNK && !long_k) || copied > kSmallMaxPack) return false;

  alignas(64) T panel[kSmallMaxPack];
  if (K == 1) {  // outer product: op(B) is one row; contiguous unless B is stored N x 1
    const T* b = B;
    if (tb == Trans::Yes && ldb != 1) {
      for (int64_t j = 0; j < N; ++j) panel[j] = B[j * ldb];
      b = panel;
    }
    small_outer(M, N, alpha, A, ta == Trans::No ? lda : 1, b, beta, C, ldc);
    return true;
  }
  if (N == 1 && ta == Trans::No) {  // dot products of A's rows with op(B)'s one column
    const T* b = B;
    if (tb == Trans::No && ldb != 1) {
      for (int64_t k = 0; k < K; ++k) panel[k] = B[k * ldb];
      b = panel;
    }
    small_dot(M, K, alpha, A, lda, b, beta, C, ldc);
    return true;
  }
  SmallProblem<T> p{};
  p.K = K;
  p.alpha = alpha;
  p.beta = beta;
  p.C = C;
  p.Cn = cols;
  // P(k, c): op(B)(k, c) in the normal orientation, op(A)(c, k) in the transposed one.
  const T* src = transposed ? A : B;
  const int64_t ld = transposed ? lda : ldb;
  if (!transposed) {
    p.R = M;
    p.X = A, p.rsx = ta == Trans::No ? lda : 1, p.csx = ta == Trans::No ? 1 : lda;
    p.rsc = ldc, p.csc = 1;
  } else {
    p.R = N;
    p.X = B, p.rsx = tb == Trans::No ? 1 : ldb, p.csx = tb == Trans::No ? ldb : 1;
    p.rsc = 1, p.csc = ldc;
  }
  if (in_place) {
    p.P = src, p.ldp = ld;
  } else {
    p.ldp = ldp;
    for (int64_t k = 0; k < K; ++k) {
      T* dst = panel + k * ldp;
      if (rows_contiguous) std::copy(src + k * ld, src + k * ld + cols, dst);
      else for (int64_t c = 0; c < cols; ++c) dst[c] = src[c * ld + k];
      std::fill(dst + cols, dst + ldp, T(0));
    }
    p.P = panel;
  }
  if (long_k) small_passes<kLongRows, kLongRows>(p, c_tail, tail.kind);
  else small_passes<V * sizeof(T) == 64 ? 8 : 4, 8>(p, c_tail, tail.kind);
  return true;
}

}  // namespace hddp::detail::HDDP_ISA
