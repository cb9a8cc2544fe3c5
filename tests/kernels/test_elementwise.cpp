// Element-wise kernels against plain scalar loops, small and above the OpenMP threshold, and
// identical for 1 and 2 threads. Run once per kernel set (HDDP_ELEMENTWISE_KERNEL, as ctest
// registers it); a set this CPU cannot execute exits 77 ("Not Run"). tanh's accuracy over every
// float is test_tanh_accuracy.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/elementwise.h>
#include <hddp/kernels/elementwise/elementwise_ukernel.h>

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
      // Within 1 ulp of the exact value (here: of tanh in long double): the float kernel is
      // 0.50011 ulp (test_tanh_accuracy), SLEEF's for doubles 1.0.
      const long double ref = std::tanh((long double)x[i]);
      const T ulp = std::nextafter(T(std::fabs(ref)), std::numeric_limits<T>::infinity()) - T(std::fabs(ref));
      ASSERT_LE(std::fabs((long double)y[i] - ref), (long double)ulp) << "x = " << x[i];
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

TYPED_TEST(Elementwise, AdamWMatchesScalarFormula) {
  using T = TypeParam;
  for (double wd : {0.0, 0.01, 0.5})
    for (int64_t n : kSizes) {
      auto p = randv<T>(n, 11), g = randv<T>(n, 12), m = randv<T>(n, 13), v = randv<T>(n, 14);
      for (auto& x : v) x = std::fabs(x);
      auto p2 = p, m2 = m, v2 = v;
      AdamWHyper h;
      h.lr = 0.01, h.weight_decay = wd;
      adamw_update(n, p.data(), g.data(), m.data(), v.data(), 3, h);
      const double bc1 = 1 - std::pow(0.9, 3), bc2 = 1 - std::pow(0.999, 3);
      for (int64_t i = 0; i < n; ++i) {
        const double gi = g[i];
        const double mi = 0.9 * m2[i] + 0.1 * gi, vi = 0.999 * v2[i] + 0.001 * gi * gi;
        const double pi = p2[i] * (1 - 0.01 * wd) - 0.01 / bc1 * mi / (std::sqrt(vi) / std::sqrt(bc2) + 1e-8);
        ASSERT_NEAR(m[i], mi, 1e-6);
        ASSERT_NEAR(v[i], vi, 1e-6);
        ASSERT_NEAR(p[i], pi, 2e-6 * (1 + std::fabs(pi)));
      }
    }
}

TYPED_TEST(Elementwise, SumSq) {
  using T = TypeParam;
  for (int64_t n : kSizes) {
    const auto x = randv<T>(n, n + 31), zero = std::vector<T>(x.size(), T(0));
    long double ref = 0;
    for (int64_t i = 0; i < n; ++i) ref += (long double)x[i] * x[i];
    EXPECT_NEAR(sum_sq(n, x.data()), double(ref), 1e-12 * (1 + double(ref))) << n;
    // The order of sum_sq_diff against zeros: the same bits.
    EXPECT_EQ(sum_sq(n, x.data()), sum_sq_diff(n, x.data(), zero.data())) << n;
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

// The special values: NaN in gives NaN out, tanh(+-inf) = +-1, the sign of zero kept, large
// arguments saturate, tiny ones return themselves; in place (y aliases x) too.
TYPED_TEST(Elementwise, TanhSpecialValues) {
  using T = TypeParam;
  using Lim = std::numeric_limits<T>;
  const std::vector<T> x = {Lim::quiet_NaN(), -Lim::quiet_NaN(), Lim::signaling_NaN(), Lim::infinity(),
                            -Lim::infinity(), T(0), -T(0), T(100), T(-100), Lim::max(), Lim::lowest(),
                            Lim::denorm_min(), -Lim::denorm_min(), Lim::min(), T(1e-30)};
  for (int64_t n = 1; n <= int64_t(x.size()); ++n) {  // every tail length of the vector loop
    std::vector<T> y(x.begin(), x.begin() + n);
    tanh_forward(n, y.data(), y.data());
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(y[i])) << "tanh(NaN) at " << i << " of " << n;
      } else if (std::fabs(x[i]) >= T(100)) {
        EXPECT_EQ(y[i], std::copysign(T(1), x[i])) << x[i];
      } else if (std::fabs(x[i]) <= T(1e-30)) {
        EXPECT_EQ(y[i], x[i]) << x[i];
        EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << x[i];
      }
    }
  }
}

// Every kernel set this CPU runs gives the bits of the portable set for every loop (no FMA
// contraction, only the Adam loops' fused multiply-adds, correctly rounded everywhere; sums in a
// fixed lane order; tanh of floats by plain operations in double) but the tanh of doubles
// (SLEEF's, per width), at sizes around each vector width.
TYPED_TEST(Elementwise, EverySetGivesThePortableBits) {
  using T = TypeParam;
  const detail::EltLoops<T>& ref = detail::loops<T>(detail::elementwise_kernels_portable());
  for (const char* name : {"avx2", "avx512"}) {
    const detail::EltKernels* k = detail::elementwise_by_name(name);
    if (!k) continue;  // this CPU cannot run it: nothing to compare
    const detail::EltLoops<T>& got = detail::loops<T>(*k);
    for (int64_t n : {0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 1001}) {
      const auto a = randv<T>(n, 100 + n), b = randv<T>(n, 200 + n), g = randv<T>(n, 300 + n);
      auto v = randv<T>(n, 400 + n);
      for (auto& e : v) e = std::fabs(e);
      const auto bits = [&](const std::vector<T>& u, const std::vector<T>& w) {
        return u.size() == w.size() && std::memcmp(u.data(), w.data(), sizeof(T) * u.size()) == 0;
      };
      auto r1 = a, r2 = a;
      if constexpr (sizeof(T) == 4) {
        ref.tanh_forward(n, a.data(), r1.data()), got.tanh_forward(n, a.data(), r2.data());
        EXPECT_TRUE(bits(r1, r2)) << name << " tanh_forward n " << n;
      }
      ref.tanh_backward(n, a.data(), b.data(), r1.data()), got.tanh_backward(n, a.data(), b.data(), r2.data());
      EXPECT_TRUE(bits(r1, r2)) << name << " tanh_backward n " << n;
      ref.relu_backward(n, a.data(), b.data(), r1.data()), got.relu_backward(n, a.data(), b.data(), r2.data());
      EXPECT_TRUE(bits(r1, r2)) << name << " relu_backward n " << n;
      ref.scaled_diff(n, T(0.3), a.data(), b.data(), r1.data()), got.scaled_diff(n, T(0.3), a.data(), b.data(), r2.data());
      EXPECT_TRUE(bits(r1, r2)) << name << " scaled_diff n " << n;
      EXPECT_EQ(ref.sum_sq_diff(n, a.data(), b.data()), got.sum_sq_diff(n, a.data(), b.data())) << name << " n " << n;
      EXPECT_EQ(ref.sum_sq(n, a.data()), got.sum_sq(n, a.data())) << name << " sum_sq n " << n;
      const detail::AdamScalars<T> as{T(0.9), T(0.999), T(0.1), T(0.001), T(1e-8), T(0.01), T(0.003), T(0.05), T(0.999)};
      auto p1 = a, p2 = a, m1 = b, m2 = b, v1 = v, v2 = v;
      ref.adam(n, p1.data(), g.data(), m1.data(), v1.data(), as), got.adam(n, p2.data(), g.data(), m2.data(), v2.data(), as);
      EXPECT_TRUE(bits(p1, p2) && bits(m1, m2) && bits(v1, v2)) << name << " adam n " << n;
      // AdamW: with and without the decay factor (1 skips the multiply).
      for (T decay : {T(0.999), T(1)}) {
        detail::AdamScalars<T> ws = as;
        ws.wd = T(0), ws.decay = decay;
        p1 = a, p2 = a, m1 = b, m2 = b, v1 = v, v2 = v;
        ref.adamw(n, p1.data(), g.data(), m1.data(), v1.data(), ws);
        got.adamw(n, p2.data(), g.data(), m2.data(), v2.data(), ws);
        EXPECT_TRUE(bits(p1, p2) && bits(m1, m2) && bits(v1, v2)) << name << " adamw decay " << decay << " n " << n;
      }
      const detail::SgdScalars<T> ss{T(0.1), T(0.9), T(0.001), false, true};
      p1 = a, p2 = a, m1 = b, m2 = b;
      ref.sgd(n, p1.data(), g.data(), m1.data(), ss), got.sgd(n, p2.data(), g.data(), m2.data(), ss);
      EXPECT_TRUE(bits(p1, p2) && bits(m1, m2)) << name << " sgd n " << n;
      const int64_t cols = std::min<int64_t>(n, detail::kColBlock), rows = cols ? n / cols : 0;
      std::vector<T> c1(size_t(cols) + 1), c2(size_t(cols) + 1);
      ref.col_sums(rows, cols, a.data(), cols, c1.data(), false), got.col_sums(rows, cols, a.data(), cols, c2.data(), false);
      EXPECT_TRUE(bits(c1, c2)) << name << " col_sums n " << n;
    }
  }
}

// The AdamW loop's fused multiply-add, m = fma(g, 1 - beta1, m * beta1), is std::fma's correctly
// rounded result in every set (the portable set emulates it for floats in double, moving a
// double-rounding midpoint towards the exact sum): with beta1 = 1 the loop returns fma(g, b, m). First the cases where rounding the exact
// sum to double first and then to float goes wrong: 1 + 2^-24 + 2^-60 (just above the midpoint
// between 1 and 1 + 2^-23: rounds up) and its mirror, the exact midpoint (ties to even), just
// below it; then random triples over wide exponent ranges, subnormal and zero results included.
TEST(ElementwiseFma, AdamWLoopRoundsLikeStdFmaInEverySet) {
  struct Triple {
    float a, b, c;
  };
  const float a = 1.f + 0x1p-12f, b = 0x1p-24f - 4095 * 0x1p-48f;  // a * b = 2^-24 (1 + 2^-36)
  std::vector<Triple> t = {{a, b, 1.f},   {-a, b, -1.f}, {1.f, 0x1p-24f, 1.f}, {1.f, 0x1p-24f - 0x1p-48f, 1.f},
                           {a, -b, -1.f}, {0.f, b, -0.f}, {3.f, 0x1p-149f, 0x1p-149f}};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 1 << 16; ++i) {
    auto draw = [&](int lo, int hi) {
      const double m = double(rng() >> 11) * 0x1p-53 * 2 - 1;
      return float(std::ldexp(m, int(rng() % uint64_t(hi - lo + 1)) + lo));
    };
    const float x = draw(-60, 20), y = draw(-60, 20);
    // c near x * y half the time: cancellation, the hard case
    const float z = (i & 1) ? -float(double(x) * y) * (1.f + draw(-30, -10)) : draw(-140, 40);
    t.push_back({x, y, z});
  }
  ASSERT_EQ(std::fma(a, b, 1.f), 1.f + 0x1p-23f);
  ASSERT_NE(float(double(a) * double(b) + 1.0), 1.f + 0x1p-23f);  // the trap the emulation avoids
  for (const char* name : {"portable", "avx2", "avx512"}) {
    const detail::EltKernels* k = detail::elementwise_by_name(name);
    if (!k) continue;
    int64_t bad = 0;
    for (const Triple& tr : t) {
      // One value per call: b is the loop's scalar 1 - beta1.
      float p = 0, g = tr.a, m = tr.c, v = 1;
      const detail::AdamScalars<float> s{1.f, 1.f, tr.b, 0.f, 1.f, 0.f, 0.f, 1.f};
      k->s.adamw(1, &p, &g, &m, &v, s);
      const float want = std::fma(tr.a, tr.b, tr.c);
      if (std::memcmp(&m, &want, sizeof m) != 0 && ++bad <= 5)
        ADD_FAILURE() << name << ": fma(" << tr.a << ", " << tr.b << ", " << tr.c << ") = " << want << ", the loop "
                      << m;
    }
    EXPECT_EQ(bad, 0) << name;
  }
}

// GELU (tanh form), forward and backward, against the formula in long double: within a few
// ulps of the larger of |y| and |x| / 2 (1 + tanh cancels for x < 0, in PyTorch's form too).
TYPED_TEST(Elementwise, GeluAgainstTheFormula) {
  using T = TypeParam;
  for (int64_t n : kSizes) {
    auto x = randv<T>(n, 21), dy = randv<T>(n, 22);
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] *= T(3);  // [-6, 6)
    std::vector<T> y(size_t(std::max<int64_t>(n, 1))), dx(y.size());
    gelu_forward(n, x.data(), y.data());
    gelu_backward(n, x.data(), dy.data(), dx.data());
    const long double k = 0.7978845608028654L, a = 0.044715L;
    const double eps = std::numeric_limits<T>::epsilon() * 4;
    for (int64_t i = 0; i < n; ++i) {
      const long double v = x[size_t(i)], t = std::tanh(k * (v + a * v * v * v));
      const long double want = 0.5L * v * (1 + t);
      const long double dwant = dy[size_t(i)] * (0.5L * (1 + t) + 0.5L * v * (1 - t * t) * k * (1 + 3 * a * v * v));
      ASSERT_NEAR(double(y[size_t(i)]), double(want), eps * (std::fabs(double(v)) + 1)) << "x = " << v;
      ASSERT_NEAR(double(dx[size_t(i)]), double(dwant), eps * 4 * (std::fabs(double(v)) + 1)) << "x = " << v;
    }
  }
}

// LayerNorm's rows against plain loops in long double; dw and db summed over chunks of rows in
// the same order for 1 and 2 threads.
TYPED_TEST(Elementwise, LayerNormAgainstPlainLoops) {
  using T = TypeParam;
  for (int64_t rows : {0, 1, 5, 33, 200})
    for (int64_t C : {1, 7, 64}) {
      auto X = randv<T>(rows * C, rows * 7 + C), dY = randv<T>(rows * C, 3), w = randv<T>(C, 4), b = randv<T>(C, 5);
      std::vector<T> Y(X.size()), dX(X.size()), mean(size_t(rows + 1)), rstd(size_t(rows + 1)), dw(static_cast<size_t>(C)), db(static_cast<size_t>(C)),
          scratch(size_t(layernorm_backward_scratch(rows, C) + 1));
      layernorm_forward(rows, C, X.data(), w.data(), b.data(), 1e-5, Y.data(), mean.data(), rstd.data());
      layernorm_backward(rows, C, X.data(), w.data(), mean.data(), rstd.data(), dY.data(), dX.data(), dw.data(), db.data(),
                         false, scratch.data());
      std::vector<long double> gw(size_t(C), 0), gb(size_t(C), 0);
      const double tol = std::numeric_limits<T>::epsilon() * 64 * double(C);
      for (int64_t r = 0; r < rows; ++r) {
        long double m = 0, v = 0, sg = 0, sgx = 0;
        for (int64_t j = 0; j < C; ++j) m += X[size_t(r * C + j)];
        m /= C;
        for (int64_t j = 0; j < C; ++j) v += (X[size_t(r * C + j)] - m) * (X[size_t(r * C + j)] - m);
        const long double rs = 1 / std::sqrt(v / C + 1e-5L);
        for (int64_t j = 0; j < C; ++j) {
          const long double xh = (X[size_t(r * C + j)] - m) * rs, g = dY[size_t(r * C + j)] * w[size_t(j)];
          ASSERT_NEAR(double(Y[size_t(r * C + j)]), double(xh * w[size_t(j)] + b[size_t(j)]), tol) << r << "," << j;
          sg += g, sgx += g * xh;
          gw[size_t(j)] += dY[size_t(r * C + j)] * xh, gb[size_t(j)] += dY[size_t(r * C + j)];
        }
        for (int64_t j = 0; j < C; ++j) {
          const long double xh = (X[size_t(r * C + j)] - m) * rs, g = dY[size_t(r * C + j)] * w[size_t(j)];
          ASSERT_NEAR(double(dX[size_t(r * C + j)]), double(rs * (g - sg / C - xh * sgx / C)), tol * double(rs)) << r;
        }
      }
      for (int64_t j = 0; j < C; ++j) {
        ASSERT_NEAR(double(dw[size_t(j)]), double(gw[size_t(j)]), tol * double(rows + 1)) << j;
        ASSERT_NEAR(double(db[size_t(j)]), double(gb[size_t(j)]), tol * double(rows + 1)) << j;
      }
    }
}

// exp_shifted: p = exp(x - shift) within an ulp of T, the sum within a few ulps of double.
TYPED_TEST(Elementwise, ExpShiftedAndItsSum) {
  using T = TypeParam;
  for (int64_t n : {0, 1, 7, 8, 9, 33, 1000}) {
    auto x = randv<T>(n, 31);
    std::vector<T> p(size_t(std::max<int64_t>(n, 1)));
    const double s = exp_shifted(n, x.data(), 0.5, p.data());
    long double want = 0;
    for (int64_t i = 0; i < n; ++i) {
      const long double e = std::exp((long double)x[size_t(i)] - 0.5L);
      want += e;
      ASSERT_NEAR(double(p[size_t(i)]), double(e), double(e) * std::numeric_limits<T>::epsilon() * 2) << i;
    }
    ASSERT_NEAR(s, double(want), double(want) * 1e-14 + 1e-300) << n;
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
  const double q1 = sum_sq_diff(M * N, X.data(), Y.data()), r1 = sum_sq(M * N, X.data());
  std::vector<float> p1 = Y, m1(M * N, 0.f), v1(M * N, 0.f);
  adamw_update(M * N, p1.data(), X.data(), m1.data(), v1.data(), 1, AdamWHyper{});
  omp_set_num_threads(2);
  col_sums(M, N, X.data(), N, s2.data(), false);
  tanh_forward(M * N, X.data(), t2.data());
  const double q2 = sum_sq_diff(M * N, X.data(), Y.data()), r2 = sum_sq(M * N, X.data());
  std::vector<float> p2 = Y, m2(M * N, 0.f), v2(M * N, 0.f);
  adamw_update(M * N, p2.data(), X.data(), m2.data(), v2.data(), 1, AdamWHyper{});
  std::vector<float> ln[2], lw[2], lb[2];
  for (int t = 0; t < 2; ++t) {
    omp_set_num_threads(t + 1);
    std::vector<float> w(N, 1.5f), b(N, 0.25f), mean(M), rstd(M), y(M * N), dx(M * N);
    std::vector<float> scratch(size_t(layernorm_backward_scratch(M, N)));
    lw[t].assign(N, 0.f), lb[t].assign(N, 0.f);
    layernorm_forward(M, N, X.data(), w.data(), b.data(), 1e-5, y.data(), mean.data(), rstd.data());
    layernorm_backward(M, N, X.data(), w.data(), mean.data(), rstd.data(), Y.data(), dx.data(), lw[t].data(), lb[t].data(),
                       false, scratch.data());
    ln[t] = dx;
  }
  omp_set_num_threads(saved);
  EXPECT_EQ(ln[0], ln[1]);
  EXPECT_EQ(lw[0], lw[1]);
  EXPECT_EQ(lb[0], lb[1]);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(v1, v2);
}

}  // namespace

// The kernel set under test is the one asked for: a silent fallback would test another set.
TEST(ElementwiseKernel, RunsTheRequestedSet) {
  const char* want = std::getenv("HDDP_ELEMENTWISE_KERNEL");
  if (want && *want) {
    EXPECT_STREQ(elementwise_kernel_name(), want);
  }
  EXPECT_EQ(detail::elementwise_by_name("avx512") != nullptr, detail::cpu_has_avx512());
  EXPECT_EQ(detail::elementwise_by_name("avx2") != nullptr, detail::cpu_has_avx2_fma());
  EXPECT_NE(detail::elementwise_by_name("portable"), nullptr);
  EXPECT_THROW(detail::elementwise_by_name("AVX2"), std::invalid_argument);
}

int main(int argc, char** argv) {
  const char* want = std::getenv("HDDP_ELEMENTWISE_KERNEL");
  if (want && *want) {
    const std::string why = detail::isa_unsupported_reason(want, "HDDP_ELEMENTWISE_KERNEL");  // throws if unknown
    if (!why.empty()) {
      std::printf("element-wise kernel set %s: NOT RUN, %s\n", want, why.c_str());
      return 77;
    }
  }
  std::printf("element-wise kernel set under test: %s\n", elementwise_kernel_name());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
