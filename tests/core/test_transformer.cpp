// The transformer's layers (core/transformer.h), Residual (core/residual.h), tied parameters and
// GPT-2 (core/gpt.h): forward against plain formulas, every backward against central finite
// differences in double (input gradients through a Linear before the layer), a whole GPT's
// gradient, the same bits for any thread count, weight-decay groups, and bad input refused.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include <hddp/core/gpt.h>
#include <hddp/core/layers.h>
#include <hddp/core/loss.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/residual.h>
#include <hddp/core/transformer.h>
#include "tests/common/gradcheck.h"

using namespace hddp;
using namespace hddp::testing_util;

namespace {

// A model's gradient against finite differences of its MSE loss at random parameters.
void check_gradient(Shape in, std::vector<LayerSpec> layers, int64_t B, uint64_t seed, int64_t stride = 1) {
  Rng rng(seed, 0);
  Sequential<double> m(in, std::move(layers), B, rng);
  const int64_t n_in = numel(in) * B, n_out = m.out_features() * B;
  expect_model_gradient(m, randv(n_in, seed + 1), randv(n_out, seed + 2), B, stride);
}

TEST(LayerNorm, GradientMatchesFiniteDifferences) {
  check_gradient({3, 5}, {Linear(5, 6), LayerNorm(6), Linear(6, 2)}, 2, 10);
  check_gradient({7}, {Linear(7, 9), LayerNorm(9, 1e-3), Linear(9, 1)}, 3, 11);
}

TEST(LayerNorm, ForwardNormalisesEachRow) {
  Sequential<double> m({4, 8}, {LayerNorm(8)}, 2);
  Rng rng(1, 0);
  m.reset_parameters(rng);
  const auto x = randv(64, 3, -5, 7);
  const double* y = m.forward(x, 2);
  for (int r = 0; r < 8; ++r) {
    double mu = 0, var = 0;
    for (int j = 0; j < 8; ++j) mu += x[size_t(r * 8 + j)] / 8;
    for (int j = 0; j < 8; ++j) var += (x[size_t(r * 8 + j)] - mu) * (x[size_t(r * 8 + j)] - mu) / 8;
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(y[r * 8 + j], (x[size_t(r * 8 + j)] - mu) / std::sqrt(var + 1e-5), 1e-12);
  }
}

TEST(GELU, ForwardIsTheTanhForm) {
  Sequential<double> m({5}, {GELU()}, 2);
  std::vector<double> x = randv(10, 4, -6, 6);
  x[0] = 0, x[1] = -0.5;
  const double* y = m.forward(x, 2);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    EXPECT_NEAR(y[i], 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))), 1e-15) << v;
  }
  // Floats: within an ulp of 0.5 x of the double formula.
  Sequential<float> mf({5}, {GELU()}, 2);
  std::vector<float> xf(x.begin(), x.end());
  const float* yf = mf.forward(xf, 2);
  for (size_t i = 0; i < x.size(); ++i) {
    const double v = xf[i], want = 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    EXPECT_NEAR(yf[i], want, 1.2e-7 * (std::fabs(v) + 1)) << v;  // 1 + tanh cancels for x < 0, as in PyTorch
  }
}

TEST(GELU, GradientMatchesFiniteDifferences) { check_gradient({2, 4}, {Linear(4, 6), GELU(), Linear(6, 2)}, 2, 12); }

TEST(CausalSelfAttention, GradientMatchesFiniteDifferences) {
  check_gradient({5, 4}, {Linear(4, 18), CausalSelfAttention(6, 2), Linear(6, 3)}, 2, 13);
  check_gradient({1, 3}, {Linear(3, 9), CausalSelfAttention(3, 1), Linear(3, 2)}, 2, 14);  // T = 1
  check_gradient({65, 2}, {Linear(2, 9), CausalSelfAttention(3, 3), Linear(3, 1)}, 1, 15);  // two blocks
}

// The fused attention keeps the log-sum-exp only (heads x T per sample) and no scratch: its
// memory grows linearly in T, never as a T x T matrix.
TEST(CausalSelfAttention, MemoryIsLinearInT) {
  for (int64_t T : {64, 128, 1024}) {
    layers::CausalSelfAttention<float> a(64, 4);
    a.setup({T, 192});
    EXPECT_EQ(a.saved_size(3), 3 * 4 * T);
    EXPECT_EQ(a.scratch_size(3), 0);
  }
}

TEST(CausalSelfAttention, LaterPositionsNeverReachEarlierOutputs) {
  Rng rng(5, 0);
  Sequential<double> m({6, 4}, {Linear(4, 12), CausalSelfAttention(4, 2)}, 1, rng);
  std::vector<double> x = randv(24, 6);
  const std::vector<double> y0(m.forward(x, 1), m.forward(x, 1) + 24);
  x[20] += 1.0;  // position 5
  const double* y1 = m.forward(x, 1);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(y1[i], y0[size_t(i)]) << i;
  EXPECT_NE(y1[20], y0[20]);
}

TEST(Residual, GradientMatchesFiniteDifferences) {
  check_gradient({2, 3}, {Linear(3, 4), Residual({LayerNorm(4), Linear(4, 5), GELU(), Linear(5, 4)}), Linear(4, 2)}, 2, 16);
  // A last sub-layer whose backward reads its output (Tanh, in place): its own buffer.
  check_gradient({3}, {Linear(3, 4), Residual({Linear(4, 4), Tanh()}), Linear(4, 1)}, 2, 17);
}

// GELU that keeps its output as any other layer does: the twin of GELU's recomputation.
template <class T>
class KeptGelu final : public Layer<T> {
 public:
  std::string name() const override { return "KeptGelu"; }
  Shape setup(const Shape& in) override { return g_.setup(in); }
  void forward(const Forward<T>& f) const override { g_.forward(f); }
  void backward(const Backward<T>& b) const override { g_.backward(b); }

 private:
  layers::GELU<T> g_;
};

TEST(Residual, RecomputesGeluBitForBitAndKeepsLess) {
  const int64_t B = 5, C = 8, H = 4 * C;
  auto model = [&](LayerSpec gelu) {
    Rng rng(21, 0);
    // Two blocks: the second's forward overwrites the scratch the first's GELU wrote.
    return Sequential<float>({3, C}, {Linear(C, C), Residual({LayerNorm(C), Linear(C, H), gelu, Linear(H, C)}),
                                      Residual({LayerNorm(C), Linear(C, H), gelu, Linear(H, C)})}, B, rng);
  };
  Sequential<float> redo = model(GELU()), kept = model(LayerSpec::of<KeptGelu>());
  ASSERT_EQ(redo.num_params(), kept.num_params());
  // The recomputed GELU's output (B x 3 positions x H values) is not among the block's saved values.
  EXPECT_EQ(kept.layer(1).saved_size(B) - redo.layer(1).saved_size(B), B * 3 * H);
  const std::vector<double> xd = randv(B * 3 * C, 22), dyd = randv(B * 3 * C, 23);
  const std::vector<float> x(xd.begin(), xd.end()), dy(dyd.begin(), dyd.end());
  for (int step = 0; step < 2; ++step) {  // the second backward accumulates
    const float* y1 = redo.forward(x, B);
    const float* y2 = kept.forward(x, B);
    for (int64_t i = 0; i < B * 3 * C; ++i) ASSERT_EQ(y1[i], y2[i]) << i;
    redo.backward(dy.data());
    kept.backward(dy.data());
    for (int64_t i = 0; i < redo.num_params(); ++i) ASSERT_EQ(redo.grads()[i], kept.grads()[i]) << "step " << step << ", " << i;
  }
}

TEST(Residual, AddsItsInputAndNamesNestedParameters) {
  Rng rng(2, 0);
  Sequential<double> m({3}, {Residual({Linear(3, 3, false)})}, 1, rng);
  EXPECT_EQ(m.param_views()[0].name, "0.0.weight");
  std::fill(m.params(), m.params() + 9, 0.0);
  const std::vector<double> x{1, -2, 3};
  const double* y = m.forward(x, 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y[i], x[size_t(i)]);
  EXPECT_THROW(Sequential<double>({3}, {Residual({Linear(3, 2)})}, 1), std::invalid_argument);
}

const GptConfig kTiny{.vocab = 11, .context = 7, .layers = 2, .heads = 2, .dim = 6};

std::vector<double> tokens(int64_t n, int64_t vocab, uint64_t seed) {
  Rng r(seed);
  std::vector<double> t(static_cast<size_t>(n));
  for (auto& v : t) v = double(int64_t(r.uniform01<double>() * double(vocab)));
  return t;
}

TEST(Gpt, GradientMatchesFiniteDifferences) {
  Rng rng(3, 0);
  Sequential<double> m({kTiny.context}, gpt_layers(kTiny), 2, rng);
  gpt_init(m, kTiny, rng);
  for (int64_t k = 0; k < m.num_params(); ++k) m.params()[k] *= 8;  // away from the near-zero start
  expect_model_gradient(m, tokens(2 * kTiny.context, kTiny.vocab, 4), randv(2 * kTiny.context * kTiny.vocab, 5), 2);
}

TEST(Gpt, TiedEmbeddingIsOneParameterWithTwoUses) {
  Rng rng(3, 0);
  Sequential<double> m({kTiny.context}, gpt_layers(kTiny), 2, rng);
  ASSERT_TRUE(m.arena().find("0.wte"));
  for (const ParamView& v : m.param_views()) EXPECT_EQ(v.name.find(std::to_string(2 * kTiny.layers + 2) + "."), std::string::npos) << v.name;
  // The head's gradient lands in wte's: zeroed once per backward, then both uses add.
  const auto x = tokens(2 * kTiny.context, kTiny.vocab, 4);
  const std::vector<double> dY = randv(2 * kTiny.context * kTiny.vocab, 5);
  m.zero_grad();
  m.forward(x, 2);
  m.backward(dY.data());
  const std::vector<double> g1(m.grads(), m.grads() + m.num_params());
  m.forward(x, 2);
  m.backward(dY.data());  // accumulates: twice
  for (int64_t k = 0; k < m.num_params(); ++k) EXPECT_NEAR(m.grads()[k], 2 * g1[size_t(k)], 1e-12 * (1 + std::fabs(g1[size_t(k)])));
  m.zero_grad();
  m.forward(x, 2);
  m.backward(dY.data());
  for (int64_t k = 0; k < m.num_params(); ++k) EXPECT_EQ(m.grads()[k], g1[size_t(k)]) << k;
  EXPECT_THROW(Sequential<double>({3}, {Linear(3, 4), TiedLinear("0.nothing", 4, 3)}, 1), std::invalid_argument);
  EXPECT_THROW(Sequential<double>({3}, {Linear(3, 4), TiedLinear("0.weight", 4, 5)}, 1), std::invalid_argument);
}

TEST(Gpt, BadTokensAreRefusedNamingThePosition) {
  Rng rng(3, 0);
  Sequential<float> m({kTiny.context}, gpt_layers(kTiny), 1, rng);
  std::vector<float> x(size_t(kTiny.context), 1.0f);
  x[4] = 11;
  try {
    m.forward(x, 1);
    FAIL() << "token 11 of a vocabulary of 11 was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("position 4"), std::string::npos) << e.what();
  }
  for (float bad : {2.5f, -1.0f, 1e30f, std::nanf("")}) {
    x[4] = bad;
    EXPECT_THROW(m.forward(x, 1), std::invalid_argument) << bad;
  }
}

// A float training step (forward, cross-entropy over every position, backward) gives the same
// bits at 1, 2 and 3 threads.
TEST(Gpt, StepBitwiseAcrossThreadCounts) {
  const GptConfig c{.vocab = 64, .context = 70, .layers = 2, .heads = 3, .dim = 48};
  const int64_t B = 3;
  std::vector<float> x(size_t(B * c.context));
  std::vector<int32_t> y(x.size());
  Rng r(9);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int64_t(r.uniform01<double>() * 64)), y[i] = int32_t(r.uniform01<double>() * 64);
  std::vector<float> ref;
  for (int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    Rng rng(3, 0);
    Sequential<float> m({c.context}, gpt_layers(c), B, rng);
    gpt_init(m, c, rng);
    SoftmaxCrossEntropy<float> xent(c.vocab);
    m.zero_grad();
    xent.forward(m.forward(x, B), y.data(), B * c.context);
    m.backward(xent.grad());
    std::vector<float> g(m.grads(), m.grads() + m.num_params());
    if (ref.empty()) ref = g;
    EXPECT_EQ(g, ref) << threads << " threads";
  }
  omp_set_num_threads(1);
}

TEST(Gpt, InitialisationIsGpt2s) {
  const GptConfig c{.vocab = 50, .context = 16, .layers = 3, .heads = 2, .dim = 32};
  Rng rng(3, 0);
  Sequential<float> m({c.context}, gpt_layers(c), 1, rng);
  gpt_init(m, c, rng);
  const auto sd = [&](const std::string& name) {
    const ParamView& v = m.arena().view(*m.arena().find(name));
    double s = 0;
    for (int64_t k = 0; k < v.size(); ++k) s += double(m.params()[v.offset + k]) * m.params()[v.offset + k];
    return std::sqrt(s / double(v.size()));
  };
  EXPECT_NEAR(sd("0.wte"), 0.02, 0.002);
  EXPECT_NEAR(sd("1.1.weight"), 0.02, 0.002);
  EXPECT_NEAR(sd("2.3.weight"), 0.02 / std::sqrt(6.0), 0.001);
  EXPECT_EQ(sd("1.1.bias"), 0.0);
  EXPECT_EQ(sd("1.0.weight"), 1.0);
}

// AdamW's groups: with zero gradients a step moves only what decays, by the factor 1 - lr wd.
TEST(Gpt, WeightDecaySkipsBiasesNormsAndEmbeddings) {
  Rng rng(3, 0);
  Sequential<float> m({kTiny.context}, gpt_layers(kTiny), 1, rng);
  gpt_init(m, kTiny, rng);
  AdamW<float> opt(m.num_params(), {.lr = 0.1, .weight_decay = 0.5});
  opt.set_decay_groups(m.param_views());
  const std::vector<float> before(m.params(), m.params() + m.num_params());
  std::vector<float> zero(size_t(m.num_params()), 0.0f);
  opt.step(m.params(), zero.data());
  int64_t no_decay = 0;
  for (const ParamView& v : m.param_views()) {
    const bool decays = v.name.find("wte") == std::string::npos && v.name.find("wpe") == std::string::npos &&
                        v.name.find("bias") == std::string::npos && v.name.find(".0.") == std::string::npos &&
                        v.name != std::to_string(2 * kTiny.layers + 1) + ".weight";
    EXPECT_EQ(v.decay, decays) << v.name;
    no_decay += decays ? 0 : v.size();
    for (int64_t k = 0; k < v.size(); ++k)
      EXPECT_EQ(m.params()[v.offset + k], decays ? before[size_t(v.offset + k)] * (1.0f - 0.05f) : before[size_t(v.offset + k)])
          << v.name;
  }
  EXPECT_EQ(opt.no_decay_values(), no_decay);
  EXPECT_NE(opt.describe().find("no_decay_values=" + std::to_string(no_decay)), std::string::npos);
}

TEST(Gpt, SampleIsSeededAndInTheVocabulary) {
  Rng rng(3, 0);
  Sequential<float> m({kTiny.context}, gpt_layers(kTiny), 4, rng);
  gpt_init(m, kTiny, rng);
  Rng a(7), b(7);
  const auto s1 = gpt_sample(m, kTiny, {1, 2}, 20, 0.8, 5, a), s2 = gpt_sample(m, kTiny, {1, 2}, 20, 0.8, 5, b);
  EXPECT_EQ(s1, s2);
  ASSERT_EQ(s1.size(), 20u);
  for (int32_t t : s1) EXPECT_TRUE(t >= 0 && t < kTiny.vocab);
  Rng g(7);
  const auto greedy = gpt_sample(m, kTiny, {1, 2}, 3, 1.0, 1, g);  // top-1: the argmax
  std::vector<float> x(size_t(kTiny.context), 0.0f);
  x[0] = 1, x[1] = 2;
  const float* logits = m.forward(x, 1) + kTiny.vocab;
  int32_t best = 0;
  for (int32_t k = 1; k < kTiny.vocab; ++k)
    if (logits[k] > logits[best]) best = k;
  EXPECT_EQ(greedy[0], best);
  EXPECT_THROW(gpt_sample(m, kTiny, {}, 3, 1.0, 0, g), std::invalid_argument);
}

}  // namespace
