// Adam and SGD against PyTorch 1.13 trajectories (tests/core/data/optim_reference.txt, made
// by tests/core/gen_optim_reference.py): the same tiny MLP, batch and MSE loss, trained for
// 8 steps by hddp's Sequential + optimizer; gradient, loss and all parameters compared after
// every step, in float32 and float64. Also hyper-parameter validation and optimizer state.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include "tests/common/testing.h"

#ifndef HDDP_CORE_TEST_DATA
#error "HDDP_CORE_TEST_DATA must name tests/core/data"
#endif

using namespace hddp;

namespace {

struct Step {
  double loss;
  std::vector<double> params;
};
struct Case {
  std::string name, dtype;
  std::map<std::string, double> hyper;
  std::vector<double> grad;
  std::vector<Step> steps;
};
struct Reference {
  std::vector<double> x, target, init;
  std::vector<Case> cases;
};

std::vector<double> read_values(std::istringstream& in, const std::string& what) {
  int64_t n = -1;
  in >> n;
  if (!in || n < 0) throw std::runtime_error("optim_reference.txt: bad count in " + what);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) in >> x;
  if (!in) throw std::runtime_error("optim_reference.txt: short record " + what);
  return v;
}

Reference load_reference() {
  const std::string path = std::string(HDDP_CORE_TEST_DATA) + "/optim_reference.txt";
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  Reference r;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    if (!(in >> key) || key[0] == '#' || key == "torch" || key == "end") continue;
    if (key == "x") r.x = read_values(in, key);
    else if (key == "target") r.target = read_values(in, key);
    else if (key == "init") r.init = read_values(in, key);
    else if (key == "case") {
      Case c;
      in >> c.name >> c.dtype;
      std::string k;
      double v;
      while (in >> k >> v) c.hyper[k] = v;
      r.cases.push_back(c);
    } else if (key == "grad") r.cases.back().grad = read_values(in, key);
    else if (key == "step") {
      int t;
      std::string lk, pk;
      Step s;
      in >> t >> lk >> s.loss >> pk;
      if (lk != "loss" || pk != "params") throw std::runtime_error("optim_reference.txt: bad step line");
      s.params = read_values(in, "step");
      r.cases.back().steps.push_back(s);
    } else {
      throw std::runtime_error("optim_reference.txt: unknown record " + key);
    }
  }
  return r;
}

const Reference& reference() {
  static const Reference r = load_reference();
  return r;
}

template <class T>
std::unique_ptr<Optimizer<T>> make_optimizer(const Case& c, int64_t n) {
  const auto& h = c.hyper;
  if (c.name.rfind("adam", 0) == 0) {
    AdamHyper a;
    a.lr = h.at("lr"), a.beta1 = h.at("beta1"), a.beta2 = h.at("beta2"), a.eps = h.at("eps");
    a.weight_decay = h.at("weight_decay");
    return std::make_unique<Adam<T>>(n, a);
  }
  SgdHyper s;
  s.lr = h.at("lr"), s.momentum = h.at("momentum"), s.weight_decay = h.at("weight_decay");
  s.nesterov = h.at("nesterov") != 0;
  return std::make_unique<SGD<T>>(n, s);
}

template <class T>
void run_case(const Case& c, double rtol) {
  const Reference& r = reference();
  Sequential<T> m({Linear(3, 4), Tanh(), Linear(4, 2)}, 5);
  ASSERT_EQ(m.num_params(), int64_t(r.init.size()));
  for (size_t i = 0; i < r.init.size(); ++i) m.params()[i] = T(r.init[i]);
  const std::vector<T> x(r.x.begin(), r.x.end()), t(r.target.begin(), r.target.end());
  auto opt = make_optimizer<T>(c, m.num_params());
  // Relative to the value, with a floor at the parameters' typical size (0.1): a parameter
  // passing near zero keeps the absolute rounding error of its earlier, larger values.
  auto close = [&](double got, double want) { return std::fabs(got - want) <= rtol * (std::fabs(want) + 0.1); };
  for (size_t s = 0; s < c.steps.size(); ++s) {
    m.zero_grad();
    m.forward(x.data(), 5);
    const double loss = m.loss(t.data());
    m.backward(t.data());
    if (s == 0) {
      for (size_t i = 0; i < c.grad.size(); ++i)
        ASSERT_TRUE(close(m.grads()[i], c.grad[i])) << "grad " << i << ": " << m.grads()[i] << " vs " << c.grad[i];
    }
    opt->step(m.arena());
    EXPECT_EQ(opt->steps(), int64_t(s + 1));
    ASSERT_TRUE(close(loss, c.steps[s].loss)) << "step " << s + 1 << " loss " << loss << " vs " << c.steps[s].loss;
    for (size_t i = 0; i < c.steps[s].params.size(); ++i)
      ASSERT_TRUE(close(m.params()[i], c.steps[s].params[i]))
          << "step " << s + 1 << " param " << i << ": " << m.params()[i] << " vs PyTorch " << c.steps[s].params[i];
  }
}

TEST(OptimReference, FileHasAllCases) {
  const Reference& r = reference();
  EXPECT_EQ(r.x.size(), 15u);
  EXPECT_EQ(r.target.size(), 10u);
  EXPECT_EQ(r.init.size(), 26u);
  ASSERT_EQ(r.cases.size(), 10u);  // 5 settings x {float32, float64}
  for (const Case& c : r.cases) {
    EXPECT_EQ(c.steps.size(), 8u) << c.name;
    EXPECT_EQ(c.grad.size(), 26u) << c.name;
    // The trajectory moves: a test against a constant would not pass.
    EXPECT_NE(c.steps.front().params, c.steps.back().params) << c.name;
  }
}

TEST(OptimReference, MatchesPyTorchFloat32) {
  int n = 0;
  for (const Case& c : reference().cases)
    if (c.dtype == "float32") {
      SCOPED_TRACE(c.name + " float32");
      run_case<float>(c, 1e-6);
      ++n;
    }
  EXPECT_EQ(n, 5);
}

TEST(OptimReference, MatchesPyTorchFloat64) {
  int n = 0;
  for (const Case& c : reference().cases)
    if (c.dtype == "float64") {
      SCOPED_TRACE(c.name + " float64");
      run_case<double>(c, 1e-12);
      ++n;
    }
  EXPECT_EQ(n, 5);
}

using hddp::testing_util::error_of;

TEST(Optim, InvalidHyperParametersNameTheParameter) {
  auto adam = [](AdamHyper h) { return error_of([&] { Adam<float>(10, h); }); };
  AdamHyper a;
  a.lr = 0;
  EXPECT_NE(adam(a).find("Adam: lr must be > 0"), std::string::npos) << adam(a);
  a = {}, a.lr = -1;
  EXPECT_NE(adam(a).find("lr"), std::string::npos);
  a = {}, a.lr = std::nan("");
  EXPECT_NE(adam(a).find("lr"), std::string::npos);
  a = {}, a.beta1 = 1.0;
  EXPECT_NE(adam(a).find("beta1 must be in [0, 1)"), std::string::npos) << adam(a);
  a = {}, a.beta2 = -0.1;
  EXPECT_NE(adam(a).find("beta2 must be in [0, 1)"), std::string::npos) << adam(a);
  a = {}, a.eps = -1e-8;
  EXPECT_NE(adam(a).find("eps must be >= 0"), std::string::npos) << adam(a);
  a = {}, a.weight_decay = -0.1;
  EXPECT_NE(adam(a).find("weight_decay"), std::string::npos) << adam(a);
  a = {};
  EXPECT_EQ(adam(a), "no std::invalid_argument");
  EXPECT_NE(error_of([] { Adam<float>(0, {}); }).find("number of parameters"), std::string::npos);

  auto sgd = [](SgdHyper h) { return error_of([&] { SGD<double>(10, h); }); };
  SgdHyper s;
  s.lr = 0;
  EXPECT_NE(sgd(s).find("SGD: lr must be > 0"), std::string::npos) << sgd(s);
  s = {}, s.momentum = -0.5;
  EXPECT_NE(sgd(s).find("momentum must be >= 0"), std::string::npos) << sgd(s);
  s = {}, s.nesterov = true;
  EXPECT_NE(sgd(s).find("nesterov requires momentum > 0"), std::string::npos) << sgd(s);
  s = {}, s.weight_decay = -1;
  EXPECT_NE(sgd(s).find("weight_decay"), std::string::npos) << sgd(s);
  s = {}, s.momentum = 0.9, s.nesterov = true;
  EXPECT_EQ(sgd(s), "no std::invalid_argument");

  Adam<float> ok(4, {});
  EXPECT_THROW(ok.set_lr(0), std::invalid_argument);
  EXPECT_EQ(ok.hyper().lr, 1e-3);  // unchanged by the refused update
  ParamArena<float> arena;
  arena.add("w", 2, 3);
  EXPECT_NE(error_of([&] { ok.step(arena); }).find("built for 4 parameters, the arena has 6"), std::string::npos);
}

TEST(Optim, StateBuffers) {
  Adam<double> a(3, {});
  std::vector<double> p = {1, 2, 3}, g = {0.5, -0.5, 1};
  a.step(p.data(), g.data());
  auto st = a.state();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].name, "exp_avg");
  EXPECT_EQ(st[1].name, "exp_avg_sq");
  EXPECT_EQ(st[0].size, 3);
  EXPECT_NEAR(st[0].data[0], 0.1 * 0.5, 1e-15);    // (1 - beta1) g
  EXPECT_NEAR(st[1].data[2], 0.001 * 1.0, 1e-15);  // (1 - beta2) g^2
  EXPECT_EQ(a.steps(), 1);
  SGD<double> plain(3, SgdHyper{});
  EXPECT_TRUE(plain.state().empty());
  SgdHyper h;
  h.momentum = 0.9;
  SGD<double> mom(3, h);
  mom.step(p.data(), g.data());
  ASSERT_EQ(mom.state().size(), 1u);
  EXPECT_EQ(mom.state()[0].name, "momentum_buffer");
  EXPECT_EQ(mom.state()[0].data[1], -0.5);  // first step: buffer = g
}

}  // namespace
