// Layers and Sequential: forward against plain loops, every backward against central finite
// differences in double, a whole 3-layer MLP's gradient, the backward hook's contract,
// initialisation bounds, and bad input naming the layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <hddp/core/layers.h>
#include <hddp/core/model.h>
#include "tests/common/gradcheck.h"
#include "tests/common/testing.h"
#include <hddp/core/rng.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/units.h>
#include <hddp/kernels/bf16.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/units.h>
#include <hddp/kernels/check.h>
#include "tests/common/mse.h"

using namespace hddp;
using namespace hddp::testing_util;

namespace {

// Precision::Bf16: the float products of the bf16-rounded operands, summed in float (any order:
// a tolerance of a few float roundings of the sums), forward and both gradients; on a CPU with no
// bf16 unit (kernels/units.h) the float products themselves.
TEST(Linear, Bf16IsTheFloatProductOfRoundedOperands) {
  const int64_t B = 64, in = 137, out = 75;  // 2 B in out >= kBf16MinFlops: large enough to pay
  const bool unit = bf16_unit() != Bf16Unit::Float;
  ASSERT_EQ(bf16_product_pays(B, out, in), unit);
  std::vector<float> X(B * in), W(out * in), b(out), dY(B * out);
  Rng rng(8, 0);
  for (auto* v : {&X, &W, &b, &dY})
    for (float& x : *v) x = rng.uniform<float>(-1, 1);
  auto rounded = [](std::vector<float> v) {
    round_bf16(int64_t(v.size()), v.data(), v.data());
    return v;
  };
  const std::vector<float> Xr = unit ? rounded(X) : X, Wr = unit ? rounded(W) : W, dYr = unit ? rounded(dY) : dY;
  std::vector<float> Y(B * out), Yr(B * out), Yf(B * out);
  linear_forward<float>(B, in, out, X.data(), W.data(), b.data(), Y.data(), Precision::Bf16);
  linear_forward<float>(B, in, out, Xr.data(), Wr.data(), b.data(), Yr.data());
  linear_forward<float>(B, in, out, X.data(), W.data(), b.data(), Yf.data());
  int differ = 0;
  for (int64_t i = 0; i < B * out; ++i) {
    EXPECT_NEAR(Y[i], Yr[i], 1e-5 * in) << i;
    differ += Y[i] != Yf[i];
  }
  if (unit) {
    EXPECT_GT(differ, 0) << "the bf16 product equals the float one everywhere: nothing was rounded";
  } else {
    EXPECT_EQ(differ, 0) << "no bf16 unit here: the product stays float";
  }
  std::vector<float> dX(B * in), dW(out * in), db(out), dXr(B * in), dWr(out * in), dbr(out);
  linear_backward<float>(B, in, out, X.data(), W.data(), dY.data(), dX.data(), dW.data(), db.data(), false,
                         Precision::Bf16);
  linear_backward<float>(B, in, out, Xr.data(), Wr.data(), dYr.data(), dXr.data(), dWr.data(), dbr.data(), false);
  for (int64_t i = 0; i < B * in; ++i) EXPECT_NEAR(dX[i], dXr[i], 1e-5 * out) << i;
  for (int64_t i = 0; i < out * in; ++i) EXPECT_NEAR(dW[i], dWr[i], 1e-5 * B) << i;
  // The bias gradient sums dY in float, as autocast's reductions do.
  std::vector<float> dbf(out);
  linear_backward<float>(B, in, out, X.data(), W.data(), dY.data(), nullptr, dW.data(), dbf.data(), false);
  for (int64_t i = 0; i < out; ++i) EXPECT_EQ(db[i], dbf[i]) << i;
}

// A product too small to pay for the conversion stays float in Precision::Bf16, bit for bit.
TEST(Linear, SmallBf16ProductsStayFloat) {
  const int64_t B = 9, in = 37, out = 11;
  ASSERT_FALSE(bf16_product_pays(B, out, in));
  std::vector<float> X(B * in), W(out * in), b(out), Y(B * out), Yf(B * out);
  Rng rng(9, 0);
  for (auto* v : {&X, &W, &b})
    for (float& x : *v) x = rng.uniform<float>(-1, 1);
  linear_forward<float>(B, in, out, X.data(), W.data(), b.data(), Y.data(), Precision::Bf16);
  linear_forward<float>(B, in, out, X.data(), W.data(), b.data(), Yf.data());
  EXPECT_EQ(Y, Yf);
}

TEST(Sequential, PrecisionBf16RunsTheProductsInBf16) {
  EXPECT_EQ(parse_precision("bf16"), Precision::Bf16);
  EXPECT_EQ(parse_precision("float"), Precision::Float);
  EXPECT_THROW(parse_precision("fp8"), std::invalid_argument);
  Rng rng(3, 0);
  // Products of 2 x 64 x 64 x 128 flops and more: large enough to run on a bf16 unit.
  Sequential<float> m({Linear(64, 128), ReLU(), Linear(128, 64)}, 64, rng);
  std::vector<float> X(64 * 64), T(64 * 64);
  for (float& x : X) x = rng.uniform<float>(-1, 1);
  for (float& x : T) x = rng.uniform<float>(-1, 1);
  auto run = [&](Precision p) {
    m.set_precision(p);
    m.zero_grad();
    m.forward(X, 64);
    std::vector<float> out(m.output(), m.output() + 64 * 64);
    hddp::testing::backward_mse(m, T.data());
    out.insert(out.end(), m.grads(), m.grads() + m.num_params());
    return out;
  };
  const std::vector<float> f = run(Precision::Float), h = run(Precision::Bf16);
  EXPECT_EQ(m.precision(), Precision::Bf16);
  int differ = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    EXPECT_NEAR(h[i], f[i], 0.02 * (1 + std::fabs(f[i]))) << i;  // bf16 keeps 8 bits
    differ += h[i] != f[i];
  }
  if (bf16_unit() != Bf16Unit::Float) {
    EXPECT_GT(differ, 0);
  } else {
    EXPECT_EQ(h, f) << "no bf16 unit here: the products stay float";
  }
  EXPECT_EQ(run(Precision::Float), f) << "back to float: the float bits again";
}

TEST(Linear, ForwardMatchesLoops) {
  for (bool bias : {true, false}) {
    const int64_t B = 7, in = 5, out = 3;
    auto X = randv(B * in, 1), W = randv(out * in, 2), b = randv(out, 3);
    std::vector<double> Y(B * out);
    linear_forward<double>(B, in, out, X.data(), W.data(), bias ? b.data() : nullptr, Y.data());
    for (int64_t i = 0; i < B; ++i)
      for (int64_t o = 0; o < out; ++o) {
        double s = bias ? b[o] : 0.0;
        for (int64_t k = 0; k < in; ++k) s += X[i * in + k] * W[o * in + k];
        EXPECT_NEAR(Y[i * out + o], s, 1e-14) << i << "," << o;
      }
  }
}

// L = sum(Y .* R), so dY = R; check dX, dW, db against differences of L.
TEST(Linear, BackwardMatchesFiniteDifferences) {
  const int64_t B = 4, in = 6, out = 3;
  auto X = randv(B * in, 11), W = randv(out * in, 12), b = randv(out, 13), R = randv(B * out, 14);
  std::vector<double> Y(B * out), dX(B * in, 99.0), dW(out * in, 0.0), db(out, 0.0);
  auto loss = [&] {
    linear_forward<double>(B, in, out, X.data(), W.data(), b.data(), Y.data());
    return dot(R, Y.data());
  };
  linear_backward<double>(B, in, out, X.data(), W.data(), R.data(), dX.data(), dW.data(), db.data());
  for (int64_t i = 0; i < B * in; ++i) expect_grad_near(dX[i], central_diff(loss, &X[i]), "dX " + std::to_string(i));
  for (int64_t i = 0; i < out * in; ++i) expect_grad_near(dW[i], central_diff(loss, &W[i]), "dW " + std::to_string(i));
  for (int64_t i = 0; i < out; ++i) expect_grad_near(db[i], central_diff(loss, &b[i]), "db " + std::to_string(i));

  // Parameter gradients accumulate; dX is overwritten; nullptr skips dX and db.
  auto dW1 = dW, db1 = db, dX1 = dX;
  linear_backward<double>(B, in, out, X.data(), W.data(), R.data(), dX.data(), dW.data(), db.data());
  for (size_t i = 0; i < dW.size(); ++i) EXPECT_NEAR(dW[i], 2 * dW1[i], 1e-14);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], 2 * db1[i], 1e-14);
  EXPECT_EQ(dX, dX1);
  linear_backward<double>(B, in, out, X.data(), W.data(), R.data(), nullptr, dW.data(), nullptr);
  for (size_t i = 0; i < dW.size(); ++i) EXPECT_NEAR(dW[i], 3 * dW1[i], 1e-14);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], 2 * db1[i], 1e-14);
}

TEST(Activations, BackwardMatchesFiniteDifferences) {
  const int64_t n = 40;
  auto X = randv(n, 21, -2, 2), R = randv(n, 22);
  for (auto& x : X)
    if (std::fabs(x) < 1e-3) x = 0.5;  // keep ReLU away from its kink
  std::vector<double> Y(n), dX(n);
  auto tanh_loss = [&] {
    tanh_forward<double>(n, X.data(), Y.data());
    return dot(R, Y.data());
  };
  tanh_loss();
  tanh_backward<double>(n, Y.data(), R.data(), dX.data());
  for (int64_t i = 0; i < n; ++i) expect_grad_near(dX[i], central_diff(tanh_loss, &X[i]), "tanh " + std::to_string(i));
  auto relu_loss = [&] {
    relu_forward<double>(n, X.data(), Y.data());
    return dot(R, Y.data());
  };
  relu_loss();
  relu_backward<double>(n, Y.data(), R.data(), dX.data());
  for (int64_t i = 0; i < n; ++i) expect_grad_near(dX[i], central_diff(relu_loss, &X[i]), "relu " + std::to_string(i));
}

TEST(Mse, ValueAndGradient) {
  const int64_t n = 12;
  auto Y = randv(n, 31), T = randv(n, 32);
  double ref = 0;
  for (int64_t i = 0; i < n; ++i) ref += (Y[i] - T[i]) * (Y[i] - T[i]);
  EXPECT_NEAR(mse_forward<double>(n, Y.data(), T.data()), ref / n, 1e-15);
  std::vector<double> dY(n);
  mse_backward<double>(n, Y.data(), T.data(), dY.data());
  auto loss = [&] { return mse_forward<double>(n, Y.data(), T.data()); };
  for (int64_t i = 0; i < n; ++i) expect_grad_near(dY[i], central_diff(loss, &Y[i]), "mse " + std::to_string(i));
  EXPECT_THROW(mse_forward<double>(0, Y.data(), T.data()), std::invalid_argument);
}

std::vector<LayerSpec> mlp3() { return {Linear(3, 5), Tanh(), Linear(5, 4), Tanh(), Linear(4, 2)}; }

TEST(Sequential, MlpGradientMatchesFiniteDifferences) {
  for (auto specs : {mlp3(), std::vector<LayerSpec>{Linear(3, 6, false), ReLU(), Linear(6, 4), Tanh(), Linear(4, 2), Tanh()}}) {
    Rng rng(5);
    const int64_t B = 6;
    Sequential<double> m(specs, /*max_batch=*/8, rng);
    auto X = randv(B * 3, 41), T = randv(B * 2, 42);
    const std::vector<double> g = expect_model_gradient(m, X, T, B);
    // A second backward accumulates.
    m.forward(X, B);
    hddp::testing::backward_mse(m, T.data());
    for (int64_t i = 0; i < m.num_params(); ++i) EXPECT_NEAR(m.grads()[i], 2 * g[i], 1e-14);
  }
}

TEST(Sequential, BackwardFromMatchesBackwardWithMseGradient) {
  Rng rng(6);
  Sequential<double> m(mlp3(), 4, rng);
  auto X = randv(4 * 3, 51), T = randv(4 * 2, 52);
  m.zero_grad();
  const double* y = m.forward(X, 4);
  std::vector<double> dY(8);
  mse_backward<double>(8, y, T.data(), dY.data());
  m.backward(dY.data());
  const std::vector<double> g1(m.grads(), m.grads() + m.num_params());
  m.zero_grad();
  m.forward(X, 4);
  hddp::testing::backward_mse(m, T.data());
  for (int64_t i = 0; i < m.num_params(); ++i) EXPECT_EQ(m.grads()[i], g1[i]);
}

// The reducer's contract: at hook(i, off) every gradient at offset >= off is final, and
// everything below off is still untouched (zero_grad is lazy: the layers overwrite, so below
// off are still the previous backward's values, and a hook's grads() never zeroes them late).
// zero_grad is lazy: the next backward overwrites (the same bits as clearing first), a read
// before it sees zeros, a second backward accumulates; linear_backward(accumulate = false)
// ignores what dW and db held.
TEST(Sequential, LazyZeroGradGivesTheClearedBits) {
  Rng r1(9), r2(9);
  Sequential<float> lazy(mlp3(), 6, r1), cleared(mlp3(), 6, r2);
  auto X = randv(6 * 3, 91), T = randv(6 * 2, 92);
  std::vector<float> Xf(X.begin(), X.end()), Tf(T.begin(), T.end());
  for (Sequential<float>* m : {&lazy, &cleared}) {  // stale gradients in both
    m->forward(Xf, 6);
    hddp::testing::backward_mse(*m, Tf.data());
  }
  lazy.zero_grad();
  cleared.arena().zero_grad();  // the eager clear, through the arena
  for (Sequential<float>* m : {&lazy, &cleared}) {
    m->forward(Xf, 6);
    hddp::testing::backward_mse(*m, Tf.data());
  }
  const std::vector<float> once(lazy.grads(), lazy.grads() + lazy.num_params());
  EXPECT_EQ(once, std::vector<float>(cleared.grads(), cleared.grads() + cleared.num_params()));
  lazy.forward(Xf, 6);
  hddp::testing::backward_mse(lazy, Tf.data());  // no zero_grad: adds
  for (int64_t i = 0; i < lazy.num_params(); ++i)  // (the products may add into C in another order)
    EXPECT_NEAR(lazy.grads()[i], 2 * once[size_t(i)], 1e-6 * (1 + std::fabs(once[size_t(i)]))) << i;
  lazy.zero_grad();
  for (int64_t i = 0; i < lazy.num_params(); ++i) ASSERT_EQ(lazy.grads()[i], 0.0f) << "read before backward: zeros";

  std::vector<double> dW(4 * 3, 7.0), db(4, -3.0), dW0(4 * 3, 0.0), db0(4, 0.0);
  auto W = randv(4 * 3, 93), dY = randv(5 * 4, 94), Xd = randv(5 * 3, 95);
  linear_backward<double>(5, 3, 4, Xd.data(), W.data(), dY.data(), nullptr, dW.data(), db.data(), false);
  linear_backward<double>(5, 3, 4, Xd.data(), W.data(), dY.data(), nullptr, dW0.data(), db0.data(), true);
  EXPECT_EQ(dW, dW0);
  EXPECT_EQ(db, db0);
}

TEST(Sequential, BackwardHookOrderAndOffsets) {
  Rng rng(7);
  const std::vector<LayerSpec> specs = {Linear(3, 5), Tanh(), Linear(5, 4, false), ReLU(), Linear(4, 2), Tanh()};
  Sequential<double> m(specs, 5, rng);
  auto X = randv(5 * 3, 61), T = randv(5 * 2, 62);
  // Final gradients, without a hook.
  m.zero_grad();
  m.forward(X, 5);
  hddp::testing::backward_mse(m, T.data());
  const std::vector<double> final_g(m.grads(), m.grads() + m.num_params());

  struct Call {
    size_t layer;
    int64_t ready;
    bool suffix_final, prefix_untouched;
  };
  std::vector<Call> calls;
  m.set_backward_hook([&](size_t layer, int64_t ready) {
    bool fin = true, zero = true;
    for (int64_t i = ready; i < m.num_params(); ++i) fin = fin && m.grads()[i] == final_g[i];
    for (int64_t i = 0; i < ready; ++i) zero = zero && m.grads()[i] == final_g[i];
    calls.push_back({layer, ready, fin, zero});
  });
  m.zero_grad();
  m.forward(X, 5);
  hddp::testing::backward_mse(m, T.data());

  // Arena: 0.weight(15) 0.bias(5) 2.weight(20) 4.weight(8) 4.bias(2) = 50.
  ASSERT_EQ(m.num_params(), 50);
  EXPECT_EQ(m.layer_param_range(4), std::make_pair(int64_t(40), int64_t(50)));
  EXPECT_EQ(m.layer_param_range(3), std::make_pair(int64_t(40), int64_t(40)));
  const std::vector<std::pair<size_t, int64_t>> want = {{5, 50}, {4, 40}, {3, 40}, {2, 20}, {1, 20}, {0, 0}};
  ASSERT_EQ(calls.size(), want.size());
  for (size_t c = 0; c < want.size(); ++c) {
    EXPECT_EQ(calls[c].layer, want[c].first) << "call " << c;
    EXPECT_EQ(calls[c].ready, want[c].second) << "call " << c;
    EXPECT_TRUE(calls[c].suffix_final) << "call " << c;
    EXPECT_TRUE(calls[c].prefix_untouched) << "call " << c;
  }
  // Forward order of the arena, PyTorch state_dict names.
  std::vector<std::string> names;
  for (const ParamView& v : m.param_views()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "4.weight", "4.bias"}));
  EXPECT_EQ(m.param_views()[2].rows, 4);
  EXPECT_EQ(m.param_views()[2].cols, 5);
}

TEST(Sequential, FloatMatchesDouble) {
  Rng r1(8), r2(8);
  Sequential<double> md(mlp3(), 16, r1);
  Sequential<float> mf(mlp3(), 16, r2);
  auto X = randv(16 * 3, 71), T = randv(16 * 2, 72);
  std::vector<float> Xf(X.begin(), X.end()), Tf(T.begin(), T.end());
  for (int64_t i = 0; i < md.num_params(); ++i) ASSERT_NEAR(mf.params()[i], md.params()[i], 1e-7);
  const double* yd = md.forward(X, 16);
  const float* yf = mf.forward(Xf, 16);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(yf[i], yd[i], 1e-5);
  EXPECT_NEAR(hddp::testing::mse_of(mf, Tf.data()), hddp::testing::mse_of(md, T.data()), 1e-5);
  md.zero_grad();
  mf.zero_grad();
  hddp::testing::backward_mse(md, T.data());
  hddp::testing::backward_mse(mf, Tf.data());
  for (int64_t i = 0; i < md.num_params(); ++i) EXPECT_NEAR(mf.grads()[i], md.grads()[i], 1e-5);
}

TEST(Sequential, InitLikePyTorchLinear) {
  Rng rng(9);
  Sequential<double> m({Linear(100, 200), Tanh(), Linear(200, 3, false)}, 1, rng);
  for (const ParamView& v : m.param_views()) {
    const double bound = 1.0 / std::sqrt(v.name[0] == '0' ? 100.0 : 200.0);
    const double* p = m.params() + v.offset;
    double mn = 1e9, mx = -1e9, s = 0, s2 = 0;
    for (int64_t k = 0; k < v.size(); ++k) {
      mn = std::min(mn, p[k]), mx = std::max(mx, p[k]);
      s += p[k], s2 += p[k] * p[k];
    }
    EXPECT_GE(mn, -bound) << v.name;
    EXPECT_LT(mx, bound) << v.name;
    if (v.size() >= 600) {  // enough draws to see the distribution
      EXPECT_LT(mn, -0.98 * bound) << v.name;
      EXPECT_GT(mx, 0.98 * bound) << v.name;
      const double var = s2 / double(v.size());
      EXPECT_NEAR(var, bound * bound / 3, 0.1 * bound * bound / 3) << v.name;
      EXPECT_NEAR(s / double(v.size()), 0.0, 0.1 * bound) << v.name;
    }
  }
  // The same seed gives the same weights; another seed does not.
  Rng a(9), b(10);
  Sequential<double> same({Linear(100, 200), Tanh(), Linear(200, 3, false)}, 1, a);
  Sequential<double> other({Linear(100, 200), Tanh(), Linear(200, 3, false)}, 1, b);
  EXPECT_TRUE(std::equal(m.params(), m.params() + m.num_params(), same.params()));
  EXPECT_FALSE(std::equal(m.params(), m.params() + m.num_params(), other.params()));
}


#define EXPECT_ERROR_HAS(call, text) EXPECT_NE(error_kind_of([&] { call; }).find(text), std::string::npos) << error_kind_of([&] { call; })

TEST(Sequential, BadInputNamesTheLayer) {
  Rng rng(1);
  Sequential<float> m({Linear(3, 5), Tanh(), Linear(5, 2)}, 4, rng);
  std::vector<float> X(5 * 3), T(4 * 2);
  EXPECT_ERROR_HAS(m.forward(X, 0), "invalid_argument");
  EXPECT_ERROR_HAS(m.forward(X, 0), "layer 0 (Linear(3, 5)): batch 0");
  EXPECT_ERROR_HAS(m.forward(X, 5), "batch 5 is outside [1, max_batch=4]");
  // 4 samples of 2 values (another data set's shape) or a buffer too short: refused, never read.
  EXPECT_ERROR_HAS(m.forward(std::span(X).first(4 * 2), 4),
                   "layer 0 (Linear(3, 5)) takes samples of shape (3,) (3 values): a batch of 4 is 12 values, "
                   "the input holds 8 (2 per sample)");
  EXPECT_ERROR_HAS(m.forward(X, 4), "a batch of 4 is 12 values, the input holds 15");
  EXPECT_ERROR_HAS(m.forward(std::span<const float>(), 4), "input is null");
  EXPECT_ERROR_HAS(m.backward(T.data()), "call forward() first");
  m.forward(std::span(X).first(4 * 3), 4);  // fine
  EXPECT_NO_THROW(hddp::testing::mse_of(m, T.data()));
  EXPECT_ERROR_HAS(m.backward(nullptr), "dY is null");

  EXPECT_ERROR_HAS((Sequential<float>({Linear(3, 5), Tanh(), Linear(4, 2)}, 4)),
                   "layer 2 (Linear(4, 2)): expects 4 input features but gets 5");
  EXPECT_ERROR_HAS((Sequential<float>({Tanh(), Linear(4, 2)}, 4)), "layer 0 (Tanh()): the input shape is not known");
  EXPECT_ERROR_HAS((Sequential<float>({Linear(0, 2)}, 4)), "layer 0 (Linear(0, 2)): in and out must be positive");
  EXPECT_ERROR_HAS((Sequential<float>({Linear(1, 2, false)}, 0)), "max_batch must be positive");
  EXPECT_ERROR_HAS((Sequential<float>({}, 4)), "no layers");
  EXPECT_ERROR_HAS(linear_forward<float>(2, 0, 3, X.data(), X.data(), nullptr, T.data()), "linear_forward: need");
  EXPECT_ERROR_HAS(linear_backward<float>(2, 3, 2, X.data(), X.data(), T.data(), nullptr, nullptr, nullptr),
                   "linear_backward: X, W, dY and dW must not be null");
}

TEST(Sequential, ReserveGrowsCapacity) {
  Rng rng(2);
  Sequential<double> m({Linear(2, 3), Tanh()}, 2, rng);
  std::vector<double> X = randv(10 * 2, 3);
  EXPECT_THROW(m.forward(X, 10), std::invalid_argument);
  m.reserve(10);
  EXPECT_EQ(m.max_batch(), 10);
  const double* y = m.forward(X, 10);
  std::vector<double> ref(30);
  linear_forward<double>(10, 2, 3, X.data(), m.params(), m.params() + 6, ref.data());
  for (int i = 0; i < 30; ++i) EXPECT_DOUBLE_EQ(y[i], std::tanh(ref[i]));
}

// A layer of the user's own through the open interface: y = a * x + c * x^2 per value, two
// parameters of shape 1 x 1, not in place (its backward reads x).
template <class T>
class Quad final : public Layer<T> {
 public:
  std::string name() const override { return "Quad()"; }
  Shape setup(const Shape& in) override {
    if (in.size() != 1) throw std::invalid_argument("wants a vector input, got " + to_string(in));
    return n_ = in[0], in;
  }
  std::vector<ParamSpec> parameters() const override { return {{"a", 1, 1}, {"c", 1, 1}}; }
  void reset_parameters(Rng& rng, T* const* p) const override { p[0][0] = rng.uniform<T>(0.5, 1), p[1][0] = rng.uniform<T>(-1, 1); }
  void forward(const Forward<T>& f) const override {
    for (int64_t i = 0; i < f.batch * n_; ++i) f.y[i] = f.params[0][0] * f.x[i] + f.params[1][0] * f.x[i] * f.x[i];
  }
  void backward(const Backward<T>& b) const override {
    T da = 0, dc = 0;
    for (int64_t i = 0; i < b.batch * n_; ++i) {
      da += b.dy[i] * b.x[i], dc += b.dy[i] * b.x[i] * b.x[i];
      if (b.dx) b.dx[i] = b.dy[i] * (b.params[0][0] + 2 * b.params[1][0] * b.x[i]);
    }
    b.grads[0][0] = (b.accumulate ? b.grads[0][0] : T(0)) + da;
    b.grads[1][0] = (b.accumulate ? b.grads[1][0] : T(0)) + dc;
  }

 private:
  int64_t n_ = 0;
};

// The same layer with an initialisation that forgets its second parameter, and one with none.
template <class T>
class QuadHalfInit final : public Layer<T> {
 public:
  std::string name() const override { return "QuadHalfInit()"; }
  Shape setup(const Shape& in) override { return in; }
  std::vector<ParamSpec> parameters() const override { return {{"a", 1, 1}, {"c", 1, 1}}; }
  void reset_parameters(Rng&, T* const* p) const override { p[0][0] = 1; }
  void forward(const Forward<T>&) const override {}
  void backward(const Backward<T>&) const override {}
};
template <class T>
class QuadNoInit final : public Layer<T> {
 public:
  std::string name() const override { return "QuadNoInit()"; }
  Shape setup(const Shape& in) override { return in; }
  std::vector<ParamSpec> parameters() const override { return {{"a", 1, 1}}; }
  void forward(const Forward<T>&) const override {}
  void backward(const Backward<T>&) const override {}
};

TEST(LayerInterface, AParameterTheInitialisationLeavesUnsetIsAnError) {
  Rng rng(7);
  EXPECT_ERROR_HAS((Sequential<float>({Linear(3, 4), layer<QuadHalfInit>()}, 2, rng)),
                   "parameter '1.c' (layer 1 (QuadHalfInit())) unset");
  EXPECT_ERROR_HAS((Sequential<double>({Linear(3, 4), layer<QuadNoInit>()}, 2, rng)),
                   "parameter '1.a' (layer 1 (QuadNoInit())) unset");
  // Without an rng nothing is initialised: the parameters are zeros, to load.
  Sequential<float> plain({Linear(3, 4), layer<QuadNoInit>()}, 2);
  EXPECT_EQ(plain.params()[plain.num_params() - 1], 0.0f);
}

TEST(LayerInterface, UserLayerTrainsInASequentialWithPyTorchNames) {
  Rng rng(7);
  Sequential<double> m({Linear(3, 4), layer<Quad>(), Tanh(), Linear(4, 2), layer<Quad>()}, 6, rng);
  EXPECT_EQ(m.describe(), "Linear(3, 4) -> Quad() -> Tanh() -> Linear(4, 2) -> Quad()");
  std::vector<std::string> names;
  for (const ParamView& v : m.param_views()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.a", "1.c", "3.weight", "3.bias", "4.a", "4.c"}));
  EXPECT_EQ(m.layer_param_range(1), std::make_pair(int64_t(16), int64_t(18)));
  const auto X = randv(6 * 3, 8), Y = randv(6 * 2, 9);
  expect_model_gradient(m, X, Y, 6);
}

TEST(LayerInterface, AnObjectOfTheCallersOwn) {
  Rng rng(3);
  auto q = std::make_shared<Quad<float>>();
  Sequential<float> m({Linear(2, 3), q}, 4, rng);
  EXPECT_EQ(m.describe(), "Linear(2, 3) -> Quad()");
  EXPECT_EQ(&m.layer(1), q.get());
  // A float layer object cannot serve a double model.
  EXPECT_ERROR_HAS((Sequential<double>({Linear(2, 3), std::make_shared<Quad<float>>()}, 4)),
                   "a layer of float cannot be used in a model of double");
  // Its setup's complaint, named by Sequential.
  EXPECT_ERROR_HAS((Sequential<double>({3, 4}, {layer<Quad>()}, 4)),
                   "Sequential: layer 0 (Quad()): wants a vector input, got (3, 4)");
}

TEST(LayerInterface, InPlaceOnlyWhereNoBackwardNeedsTheOverwrittenValues) {
  // Tanh after Tanh reads its own output in backward: the second gets its own buffer; the
  // gradients prove it (a shared buffer would differentiate the first from the second's output).
  Rng rng(11);
  Sequential<double> m({Linear(3, 5), Tanh(), Tanh(), ReLU(), Linear(5, 2), Tanh()}, 4, rng);
  const auto X = randv(4 * 3, 12), Y = randv(4 * 2, 13);
  expect_model_gradient(m, X, Y, 4);
  // A model starting with an activation, its input shape given.
  Sequential<double> a({3}, {Tanh(), Linear(3, 2)}, 4, rng);
  EXPECT_EQ(a.input_shape(), Shape{3});
  expect_model_gradient(a, X, Y, 4);
}

}  // namespace

// Softmax cross-entropy: PyTorch's values (torch.nn.functional.cross_entropy in float64 on these
// logits and labels, 1.13), central differences, extreme logits, and bad labels.
TEST(SoftmaxXent, MatchesPyTorch) {
  const std::vector<double> x = {1.0, 2.0, -0.5, 0.25, 100.0, -100.0, 50.0, 0.0, -3.0, -3.0, -3.0, -3.0};
  const std::vector<int32_t> y = {1, 2, 3};
  const double torch_loss = 17.29034183194062;
  const std::vector<double> torch_grad = {0.07552108249443207, -0.1280457471231621, 0.016851031231565408,
                                          0.03567363339716467, 0.3333333333333333, 4.6129884224557915e-88,
                                          -0.3333333333333333, 1.2400253253402787e-44, 0.08333333333333333,
                                          0.08333333333333333, 0.08333333333333333, -0.25};
  std::vector<double> p(x.size()), g(x.size());
  EXPECT_NEAR(softmax_xent_forward(3, 4, x.data(), y.data(), p.data()), torch_loss, 1e-12);
  softmax_xent_backward(3, 4, p.data(), y.data(), g.data());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], torch_grad[i], 1e-15) << i;
  // float: the same within float rounding, finite for logits 200 apart.
  std::vector<float> xf(x.begin(), x.end()), pf(x.size());
  EXPECT_NEAR(softmax_xent_forward(3, 4, xf.data(), y.data(), pf.data()), torch_loss, 1e-5);
  softmax_xent_backward(3, 4, pf.data(), y.data(), pf.data());  // in place
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(pf[i], torch_grad[i], 1e-7) << i;
}

TEST(SoftmaxXent, GradientIsTheLossDerivative) {
  const int64_t B = 5, C = 7;
  std::vector<double> x = randv(B * C, 42, -3, 3), p(B * C), g(B * C);
  std::vector<int32_t> y = {0, 6, 3, 3, 1};
  softmax_xent_forward(B, C, x.data(), y.data(), p.data());
  softmax_xent_backward(B, C, p.data(), y.data(), g.data());
  for (int64_t i = 0; i < B * C; ++i) {
    const double d = central_diff([&] { return softmax_xent_forward(B, C, x.data(), y.data(), p.data()); }, &x[size_t(i)]);
    EXPECT_NEAR(g[size_t(i)], d, 1e-8) << i;
  }
}

TEST(SoftmaxXent, BadInputNamed) {
  std::vector<float> x(8), p(8);
  std::vector<int32_t> y = {0, 4};
  try {
    softmax_xent_forward(2, 4, x.data(), y.data(), p.data());
    FAIL() << "label 4 of 4 classes accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("row 1 has label 4"), std::string::npos) << e.what();
  }
  y = {-1, 0};
  EXPECT_THROW(softmax_xent_backward(2, 4, p.data(), y.data(), p.data()), std::invalid_argument);
  EXPECT_THROW(softmax_xent_forward(0, 4, x.data(), y.data(), p.data()), std::invalid_argument);
}
