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
#include <hddp/kernels/gemm_backends.h>

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

// Runs fn on the case and checks every element of C (and that padding is untouched) against
// an oracle in higher precision (double for float: products of floats are exact there and the
// sum's error is 2^-29 of the bound; long double for double), with a bound of 4*(K+2)*eps times
// the magnitudes involved. The oracle reads op(A)'s rows and op(B)'s columns contiguously so it
// streams memory: the CNN's products (12544 x 64 x 288 and up) are checked in about a second.
// Returns the result for further comparisons (e.g. bitwise equality across thread counts).
template <class T>
std::vector<T> run_and_check(GemmFn<T> fn, const GemmCase& c, uint64_t seed, ::testing::AssertionResult* out) {
  using Acc = std::conditional_t<sizeof(T) < sizeof(double), double, long double>;
  GemmData<T> d(c, seed);
  std::vector<T> C = d.C0;
  fn(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), d.A.data(), d.lda, d.B.data(), d.ldb, T(c.beta), C.data(), d.ldc);
  const long double eps = std::numeric_limits<T>::epsilon();
  *out = ::testing::AssertionSuccess();
  // op(B) as the oracle reads it: K x N for float (b[k * N + j]), N x K for double (b[j * K + k]).
  constexpr bool kRows = std::is_same_v<Acc, double>;
  std::vector<T> b(size_t(std::max<int64_t>(1, c.K * c.N))), a(size_t(std::max<int64_t>(1, c.K)));
  for (int64_t j = 0; j < c.N; ++j)
    for (int64_t k = 0; k < c.K; ++k)
      b[kRows ? k * c.N + j : j * c.K + k] = c.tb == Trans::No ? d.B[k * d.ldb + j] : d.B[j * d.ldb + k];
  std::vector<Acc> acc(size_t(std::max<int64_t>(1, c.N))), mag(acc.size());
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = c.N; j < d.ldc; ++j) {  // padding must be untouched
      const T got = C[i * d.ldc + j], was = d.C0[i * d.ldc + j];
      if (!(got == was || (std::isnan(got) && std::isnan(was)))) {
        *out = ::testing::AssertionFailure() << "padding written at (" << i << "," << j << ")";
        return C;
      }
    }
    for (int64_t k = 0; k < c.K; ++k) a[k] = c.ta == Trans::No ? d.A[i * d.lda + k] : d.A[k * d.lda + i];
    if constexpr (kRows) {  // float: i-k-j over op(B)'s rows, vectorised
      std::fill(acc.begin(), acc.end(), 0.0);
      std::fill(mag.begin(), mag.end(), 0.0);
      for (int64_t k = 0; k < c.K; ++k)
        for (int64_t j = 0; j < c.N; ++j) {
          const double p = double(a[k]) * double(b[k * c.N + j]);
          acc[j] += p;
          mag[j] += std::fabs(p);
        }
    } else for (int64_t j = 0; j < c.N; ++j) {  // double: long-double dot products
      const T* bj = &b[j * c.K];
      Acc s = 0, m = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const Acc p = Acc(a[k]) * Acc(bj[k]);
        s += p;
        m += std::fabs(p);
      }
      acc[j] = s;
      mag[j] = m;
    }
    for (int64_t j = 0; j < c.N; ++j) {
      const T got = C[i * d.ldc + j];
      const long double c0 = c.beta == 0 ? 0.0L : (long double)d.C0[i * d.ldc + j];
      const long double ref = (long double)T(c.alpha) * (long double)acc[j] + (long double)T(c.beta) * c0;
      const long double bound = 4 * (c.K + 2) * eps *
                                    (std::fabs((long double)c.alpha) * (long double)mag[j] +
                                     std::fabs((long double)c.beta * c0)) + 1e-30L;
      if (!(std::fabs((long double)got - ref) <= bound)) {
        *out = ::testing::AssertionFailure()
               << "C(" << i << "," << j << ") = " << got << ", expected " << (double)ref
               << " (bound " << (double)bound << ")";
        return C;
      }
    }
  }
  return C;
}

}  // namespace hddp::test
