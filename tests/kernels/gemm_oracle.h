#pragma once
// Test helpers for GEMM: random operands, a higher-precision oracle and its error bound.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <algorithm>
#include <vector>

#include <gtest/gtest.h>

#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_backends.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

namespace hddp::test {

using hddp::GemmFn;

struct GemmCase {
  Trans ta, tb;
  int64_t M, N, K;
  double alpha, beta;
  int64_t pad;  // leading dimensions exceed their minimum by this much
};

template <class T>
struct GemmData {
  int64_t lda, ldb, ldc;
  std::vector<T> A, B, C0;
  GemmData(const GemmCase& c, uint64_t seed) {
    const int64_t a_rows = c.ta == Trans::No ? c.M : c.K, a_cols = c.ta == Trans::No ? c.K : c.M;
    const int64_t b_rows = c.tb == Trans::No ? c.K : c.N, b_cols = c.tb == Trans::No ? c.N : c.K;
    lda = std::max<int64_t>(1, a_cols) + c.pad;
    ldb = std::max<int64_t>(1, b_cols) + c.pad;
    ldc = std::max<int64_t>(1, c.N) + c.pad;
    std::mt19937_64 rng(seed);
    auto fill = [&](std::vector<T>& v, int64_t n) {
      v.resize(std::max<int64_t>(n, 1));
      for (auto& x : v) x = T(double(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
    };
    fill(A, a_rows * lda);
    fill(B, b_rows * ldb);
    fill(C0, c.M * ldc);
    if (c.beta == 0)  // beta == 0 must overwrite: poison C with NaN and Inf
      for (size_t i = 0; i < C0.size(); ++i) C0[i] = i % 2 ? std::numeric_limits<T>::quiet_NaN()
                                                            : std::numeric_limits<T>::infinity();
  }
};

// The last K block of a product: gemm_blocked steps K in balanced blocks of at most the class's
// KC (kc_step_for in gemm_blocked.cpp); a kernel that skipped it leaves out k in [cut, K).
template <class T>
int64_t last_k_block_start(int64_t M, int64_t N, int64_t K) {
  if (K <= 0) return 0;
  const int64_t KC = detail::kernel_set<T>(detail::cpu_kernels()).tile(detail::shape_class(M, N, K)).blocking.KC;
  int64_t blocks = (K + KC - 1) / KC;
  if (blocks > 1 && K - (blocks - 1) * KC <= KC / 4) --blocks;
  const int64_t step = (K + blocks - 1) / blocks;
  return (K - 1) / step * step;
}

// Checks C = fn's result on the case (and that padding is untouched) against an oracle in higher
// precision (double for float: products of floats are exact there; long double for double), with
// two bounds, each in units of eps times the magnitudes involved, m = |alpha| sum_k |a_ik b_kj| +
// |beta c0|:
//   - each element within min(4 (K+2), 16 sqrt(K+2)) eps m: the worst case of any summation
//     order, and for K above 14 the probabilistic bound (Higham and Mary, 2019) with lambda = 32
//     in units of the unit roundoff, which independent rounding errors exceed with probability
//     below e^-500;
//   - C as a whole: |C - ref|_F <= 16 sqrt(K+2) eps (|alpha AB|_F + |beta C0|_F), the same
//     factor on the norms: the relative error of a sum of K terms grows as sqrt(K) eps.
// The worst-case bound alone, 4 K eps sum |a||b|, is wider than the result itself where K is
// long (the CNN's weight gradient, K = 50176: sum |a||b| is about K/4, the result about
// sqrt(K)/3): a kernel that left C as it was would have passed. So every case with alpha != 0
// and K > 0 also checks three wrong results against the same oracle, each of which must be
// rejected: C left as it was, beta C0 alone (the product dropped), and the product without its
// last K block (last_k_block_start). The oracle reads op(A)'s rows and op(B)'s columns
// contiguously so it streams memory: the CNN's products (12544 x 64 x 288 and up) are checked
// in about a second.
template <class T>
::testing::AssertionResult check_against_oracle(const GemmCase& c, const GemmData<T>& d, const std::vector<T>& C) {
  using Acc = std::conditional_t<sizeof(T) < sizeof(double), double, long double>;
  using LD = long double;
  const LD eps = std::numeric_limits<T>::epsilon();
  const LD n = LD(c.K + 2);
  const LD factor = std::min(4 * n, 16 * std::sqrt(n)) * eps, norm_factor = 16 * std::sqrt(n) * eps;
  // The wrong results: 0 C0 as it was, 1 beta C0, 2 the last K block missing.
  constexpr int kWrong = 3;
  const bool wrong_too = c.alpha != 0 && c.K > 0 && c.M > 0 && c.N > 0;
  const int64_t cut = last_k_block_start<T>(c.M, c.N, c.K);
  bool rejected[kWrong] = {false, false, false};
  LD werr2[kWrong] = {0, 0, 0}, err2 = 0, ab2 = 0, bc2 = 0;
  // op(B) as the oracle reads it: K x N for float (b[k * N + j]), N x K for double (b[j * K + k]).
  constexpr bool kRows = std::is_same_v<Acc, double>;
  std::vector<T> b(size_t(std::max<int64_t>(1, c.K * c.N))), a(size_t(std::max<int64_t>(1, c.K)));
  for (int64_t j = 0; j < c.N; ++j)
    for (int64_t k = 0; k < c.K; ++k)
      b[kRows ? k * c.N + j : j * c.K + k] = c.tb == Trans::No ? d.B[k * d.ldb + j] : d.B[j * d.ldb + k];
  std::vector<Acc> acc(size_t(std::max<int64_t>(1, c.N))), mag(acc.size()), part(acc.size());
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = c.N; j < d.ldc; ++j) {  // padding must be untouched
      const T got = C[i * d.ldc + j], was = d.C0[i * d.ldc + j];
      if (!(got == was || (std::isnan(got) && std::isnan(was))))
        return ::testing::AssertionFailure() << "padding written at (" << i << "," << j << ")";
    }
    for (int64_t k = 0; k < c.K; ++k) a[k] = c.ta == Trans::No ? d.A[i * d.lda + k] : d.A[k * d.lda + i];
    if constexpr (kRows) {  // float: i-k-j over op(B)'s rows, vectorised
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      std::fill(part.begin(), part.end(), 0.0);
      for (int64_t k = 0; k < c.K; ++k) {
        if (k == cut) std::copy(acc.begin(), acc.end(), part.begin());
        for (int64_t j = 0; j < c.N; ++j) {
          const double p = double(a[k]) * double(b[k * c.N + j]);
          acc[j] += p;
          mag[j] += std::fabs(p);
        }
      }
    } else for (int64_t j = 0; j < c.N; ++j) {  // double: long-double dot products
      const T* bj = &b[j * c.K];
      Acc s = 0, m = 0, sc = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        if (k == cut) sc = s;
        const Acc p = Acc(a[k]) * Acc(bj[k]);
        s += p;
        m += std::fabs(p);
      }
      acc[j] = s;
      mag[j] = m;
      part[j] = sc;
    }
    for (int64_t j = 0; j < c.N; ++j) {
      const T got = C[i * d.ldc + j];
      const T was = d.C0[i * d.ldc + j];
      const LD alpha = LD(T(c.alpha)), beta = LD(T(c.beta));
      const LD c0 = c.beta == 0 ? 0.0L : LD(was);
      const LD ab = alpha * LD(acc[j]), bc = beta * c0, ref = ab + bc;
      const LD bound = factor * (std::fabs(alpha) * LD(mag[j]) + std::fabs(bc)) + 1e-30L;
      if (!(std::fabs(LD(got) - ref) <= bound))
        return ::testing::AssertionFailure() << "C(" << i << "," << j << ") = " << got << ", expected " << double(ref)
                                             << " (bound " << double(bound) << ")";
      err2 += (LD(got) - ref) * (LD(got) - ref);
      ab2 += ab * ab;
      bc2 += bc * bc;
      if (!wrong_too) continue;
      const T wrong[kWrong] = {was, c.beta == 0 ? T(0) : T(c.beta) * was, T(alpha * LD(part[j]) + bc)};
      for (int w = 0; w < kWrong; ++w) {
        if (rejected[w]) continue;
        if (!std::isfinite(wrong[w])) {  // beta == 0's poison; no x87 arithmetic on it (slow)
          rejected[w] = true;
          continue;
        }
        const LD e = std::fabs(LD(wrong[w]) - ref);
        if (!(e <= bound)) rejected[w] = true;
        else werr2[w] += e * e;
      }
    }
  }
  const LD norm_bound = norm_factor * (std::sqrt(ab2) + std::sqrt(bc2)) + 1e-30L;
  if (!(std::sqrt(err2) <= norm_bound))
    return ::testing::AssertionFailure() << "|C - ref|_F = " << double(std::sqrt(err2)) << " above its bound "
                                         << double(norm_bound);
  // A wrong result is rejected by an element out of bounds or by its norm (the elements within
  // their bounds alone: any error outside adds more).
  const char* what[kWrong] = {"C left as it was", "beta C0 alone (the product dropped)",
                              "the product without its last K block"};
  for (int w = 0; wrong_too && w < kWrong; ++w)
    if (!rejected[w] && !(std::sqrt(werr2[w]) > norm_bound))
      return ::testing::AssertionFailure() << "the check accepts a wrong result, " << what[w] << " (K block from "
                                           << cut << "): the bounds are too wide";
  return ::testing::AssertionSuccess();
}

// Runs fn on the case and checks the result (check_against_oracle). Returns the result for
// further comparisons (e.g. bitwise equality across thread counts).
template <class T>
std::vector<T> run_and_check(GemmFn<T> fn, const GemmCase& c, uint64_t seed, ::testing::AssertionResult* out) {
  GemmData<T> d(c, seed);
  std::vector<T> C = d.C0;
  fn(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), d.A.data(), d.lda, d.B.data(), d.ldb, T(c.beta), C.data(), d.ldc);
  *out = check_against_oracle<T>(c, d, C);
  return C;
}

}  // namespace hddp::test
