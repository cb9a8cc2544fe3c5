// Element-wise kernels against plain scalar loops, small and above the OpenMP threshold,
// and identical for 1 and 2 threads.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/elementwise.h"

using namespace hddp;

namespace {

template <class T>
std::vector<T> randv(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(std::max<int64_t>(n, 1));
  for (auto& x : v) x = T(double(rng() >> 11) * 0x1.0p-53 * 4.0 - 2.0);
  return v;
}

template <class T>
class Elementwise : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Elementwise, Types);

const int64_t kSizes[] = {0, 1, 7, 33, 1000, kParallelMin + 17};

TYPED_TEST(Elementwise, BiasAndColSums) {
  using T = TypeParam;
  for (int64_t M : {0, 1, 3, 32, 700})
    for (int64_t N : {0, 1, 20, 65, 130}) {
      const int64_t ld = N + 3;
      auto Y = randv<T>(M * ld, M * 131 + N), b = randv<T>(N, 7), out = randv<T>(N, 9);
      auto Yref = Y;
      add_bias_rows(M, N, b.data(), Y.data(), ld);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < ld; ++j)
          ASSERT_EQ(Y[i * ld + j], j < N ? T(Yref[i * ld + j] + b[j]) : Yref[i * ld + j]);
      for (bool acc : {false, true}) {
        auto got = out;
        col_sums(M, N, Y.data(), ld, got.data(), acc);
        for (int64_t j = 0; j < N; ++j) {
          T s = acc ? out[j] : T(0);
          for (int64_t i = 0; i < M; ++i) s += Y[i * ld + j];
          ASSERT_EQ(got[j], s) << "col " << j;
        }
      }
    }
}

TYPED_TEST(Elementwise, TanhAxpyScale) {
  using T = TypeParam;
  for (int64_t n : kSizes) {
    auto x = randv<T>(n, n + 1), dy = randv<T>(n, n + 2), y(x), dx(x), z = randv<T>(n, n + 3), w(z);
    tanh_forward(n, x.data(), y.data());
    tanh_backward(n, y.data(), dy.data(), dx.data());
    axpy(n, T(0.25), x.data(), z.data());
    scale(n, T(-3), w.data());
    auto w0 = randv<T>(n, n + 3), z0 = randv<T>(n, n + 3);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(y[i], std::tanh(x[i]));
      ASSERT_EQ(dx[i], T(dy[i] * (T(1) - y[i] * y[i])));
      ASSERT_EQ(z[i], T(z0[i] + T(0.25) * x[i]));
      ASSERT_EQ(w[i], T(w0[i] * T(-3)));
    }
  }
}

TYPED_TEST(Elementwise, ReluForwardBackward) {
  using T = TypeParam;
  for (int64_t n : kSizes) {
    auto x = randv<T>(n, n + 11), dy = randv<T>(n, n + 12), y(x), dx(dy);
    if (n > 3) x[3] = T(0);  // relu(0) = 0 and its gradient is 0, as in PyTorch
    relu_forward(n, x.data(), y.data());
    relu_backward(n, y.data(), dy.data(), dx.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(y[i], x[i] > T(0) ? x[i] : T(0)) << i;
      ASSERT_EQ(dx[i], x[i] > T(0) ? dy[i] : T(0)) << i;
    }
    // In place: dx aliases dy, y aliases x.
    relu_backward(n, y.data(), dy.data(), dy.data());
    relu_forward(n, x.data(), x.data());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(dy[i], dx[i]);
      ASSERT_EQ(x[i], y[i]);
    }
  }
}

TYPED_TEST(Elementwise, SumSqDiffAndScaledDiff) {
  using T = TypeParam;
  for (int64_t n : kSizes) {
    auto a = randv<T>(n, n + 21), b = randv<T>(n, n + 22), out(a);
    long double ref = 0;
    for (int64_t i = 0; i < n; ++i) ref += (long double)(double(a[i]) - double(b[i])) * (double(a[i]) - double(b[i]));
    EXPECT_NEAR(sum_sq_diff(n, a.data(), b.data()), double(ref), 1e-12 * (1 + double(ref))) << n;
    scaled_diff(n, T(0.5), a.data(), b.data(), out.data());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], T(T(0.5) * (a[i] - b[i]))) << i;
    scaled_diff(n, T(-2), a.data(), b.data(), a.data());  // out aliases a
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], T(T(-2) * (out[i] / T(0.5)))) << i;
  }
}

TYPED_TEST(Elementwise, AdamMatchesScalarFormula) {
  using T = TypeParam;
  for (double wd : {0.0, 0.01})
    for (int64_t n : kSizes) {
      auto p = randv<T>(n, 1), g = randv<T>(n, 2), m = randv<T>(n, 3), v = randv<T>(n, 4);
      for (auto& x : v) x = std::fabs(x);
      auto p2 = p, m2 = m, v2 = v;
      AdamHyper h;
      h.lr = 0.01, h.weight_decay = wd;
      adam_update(n, p.data(), g.data(), m.data(), v.data(), 3, h);
      const double bc1 = 1 - std::pow(0.9, 3), bc2 = 1 - std::pow(0.999, 3);
      for (int64_t i = 0; i < n; ++i) {
        const double gi = g[i] + wd * p2[i];
        const double mi = 0.9 * m2[i] + 0.1 * gi, vi = 0.999 * v2[i] + 0.001 * gi * gi;
        const double pi = p2[i] - 0.01 / bc1 * mi / (std::sqrt(vi) / std::sqrt(bc2) + 1e-8);
        ASSERT_NEAR(m[i], mi, 1e-6);
        ASSERT_NEAR(v[i], vi, 1e-6);
        ASSERT_NEAR(p[i], pi, 2e-6 * (1 + std::fabs(pi)));
      }
    }
}

TYPED_TEST(Elementwise, SgdMomentumNesterov) {
  using T = TypeParam;
  for (bool nesterov : {false, true}) {
    const int64_t n = 50;
    auto p = randv<T>(n, 1), g = randv<T>(n, 2), buf = randv<T>(n, 3);
    auto p2 = p, buf0 = buf;
    SgdHyper h;
    h.lr = 0.1, h.momentum = 0.9, h.nesterov = nesterov, h.weight_decay = 0.001;
    sgd_update(n, p.data(), g.data(), buf.data(), 1, h);  // first step: buf = g
    sgd_update(n, p.data(), g.data(), buf.data(), 2, h);
    for (int64_t i = 0; i < n; ++i) {
      double pi = p2[i], b = 0;
      for (int step = 1; step <= 2; ++step) {
        const double gi = g[i] + 0.001 * pi;
        b = step == 1 ? gi : 0.9 * b + gi;
        pi -= 0.1 * (nesterov ? gi + 0.9 * b : b);
      }
      ASSERT_NEAR(p[i], pi, 1e-5);
      ASSERT_NEAR(buf[i], b, 1e-5);
    }
  }
}

// Above the threshold the loops run in parallel; the results must not depend on it.
// all_finite: every size, one bad value at the first, a middle and the last position, each
// kind of non-finite value (both signs, quiet and signalling NaN); the extremes that are finite.
TYPED_TEST(Elementwise, AllFiniteFindsEveryKindOfBadValueAnywhere) {
  using T = TypeParam;
  using L = std::numeric_limits<T>;
  const T bad[] = {L::quiet_NaN(), -L::quiet_NaN(), L::signaling_NaN(), L::infinity(), -L::infinity()};
  for (int64_t n : kSizes) {
    std::vector<T> x = randv<T>(n, 9);
    EXPECT_TRUE(all_finite(n, x.data())) << n;
    if (n == 0) continue;
    x[0] = L::max(), x[n - 1] = -L::max();
    if (n > 2) x[n / 2] = L::denorm_min();
    EXPECT_TRUE(all_finite(n, x.data())) << n;
    for (int64_t at : {int64_t(0), n / 2, n - 1})
      for (T b : bad) {
        std::vector<T> y = x;
        y[at] = b;
        EXPECT_FALSE(all_finite(n, y.data())) << "n " << n << ", " << b << " at " << at;
        EXPECT_TRUE(all_finite(at, y.data())) << "only the values before it";
      }
  }
}

TEST(ElementwiseThreads, IdenticalForOneAndTwoThreads) {
  const int saved = omp_get_max_threads();
  const int64_t M = 600, N = 300;
  auto X = randv<float>(M * N, 5);
  auto Y = randv<float>(M * N, 6);
  std::vector<float> s1(N), s2(N), t1(M * N), t2(M * N);
  omp_set_num_threads(1);
  col_sums(M, N, X.data(), N, s1.data(), false);
  tanh_forward(M * N, X.data(), t1.data());
  const double q1 = sum_sq_diff(M * N, X.data(), Y.data());
  omp_set_num_threads(2);
  col_sums(M, N, X.data(), N, s2.data(), false);
  tanh_forward(M * N, X.data(), t2.data());
  const double q2 = sum_sq_diff(M * N, X.data(), Y.data());
  omp_set_num_threads(saved);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(q1, q2);
}

}  // namespace
