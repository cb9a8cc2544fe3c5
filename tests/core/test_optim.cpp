// Adam, AdamW and SGD against PyTorch 1.13 trajectories (tests/core/data/optim_reference.txt,
// made by tests/core/gen_optim_reference.py): the same tiny MLP, batch and MSE loss, trained for
// 8 steps by hddp's Sequential + optimizer; gradient, loss and all parameters compared after
// every step, in float32 and float64 (to a relative tolerance: the forward and backward passes
// round differently from PyTorch's). The optimizers alone against PyTorch to the bit, and
// clip_grad_norm against torch.nn.utils.clip_grad_norm_ (optim_bits_reference.txt,
// clip_reference.txt, made by gen_optim_kit_reference.py). Also hyper-parameter validation,
// optimizer state, AdamW's save/load.
#include <gtest/gtest.h>
#include <omp.h>

#include <bit>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/serialize.h>
#include <hddp/core/util.h>
#include "tests/common/testing.h"
#include "tests/common/mse.h"

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
  if (c.name.rfind("adamw", 0) == 0) {
    AdamWHyper a;
    a.lr = h.at("lr"), a.beta1 = h.at("beta1"), a.beta2 = h.at("beta2"), a.eps = h.at("eps");
    a.weight_decay = h.at("weight_decay");
    return std::make_unique<AdamW<T>>(n, a);
  }
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
    m.forward(x, 5);
    const double loss = hddp::testing::mse_of(m, t.data());
    hddp::testing::backward_mse(m, t.data());
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
  ASSERT_EQ(r.cases.size(), 14u);  // 7 settings x {float32, float64}
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
  EXPECT_EQ(n, 7);
}

TEST(OptimReference, MatchesPyTorchFloat64) {
  int n = 0;
  for (const Case& c : reference().cases)
    if (c.dtype == "float64") {
      SCOPED_TRACE(c.name + " float64");
      run_case<double>(c, 1e-12);
      ++n;
    }
  EXPECT_EQ(n, 7);
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

// ---- The optimizers alone, to the bit (optim_bits_reference.txt) ----

std::ifstream open_data(const std::string& name) {
  const std::string path = std::string(HDDP_CORE_TEST_DATA) + "/" + name;
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  return f;
}

struct BitsCase {
  std::string name, kind;
  std::map<std::string, double> hyper;
  std::vector<double> lrs;
  std::vector<std::vector<double>> params;  // after each step
  std::vector<double> exp_avg, exp_avg_sq;
  std::vector<uint64_t> params_hash;  // large problems: FNV-1a 64 of the bytes instead
  uint64_t exp_avg_hash = 0, exp_avg_sq_hash = 0;
};
struct BitsProblem {
  std::string dtype;
  bool large = false;
  int64_t n = 0, steps = 0;
  uint64_t seed = 0;
  std::vector<double> init;
  std::vector<std::vector<double>> grads;  // per step
  std::vector<BitsCase> cases;
};

// The generator's draws for a large problem (gen_optim_kit_reference.py): splitmix64.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};

void draw_large(BitsProblem& p) {
  SplitMix64 rng{p.seed};
  p.init.resize(size_t(p.n));
  for (double& x : p.init) x = 4.0 * rng.uniform() - 2.0;
  p.grads.assign(size_t(p.steps), std::vector<double>(size_t(p.n)));
  for (auto& g : p.grads)
    for (double& x : g) {
      const double u = rng.uniform();
      x = (2.0 * u - 1.0) * std::ldexp(1.0, -int(rng.next() % 15));
    }
}

uint64_t read_hex(std::istringstream& in) {
  std::string h;
  in >> h;
  return std::stoull(h, nullptr, 16);
}

std::vector<BitsProblem> load_bits() {
  std::ifstream f = open_data("optim_bits_reference.txt");
  std::vector<BitsProblem> r;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    if (!(in >> key) || key[0] == '#' || key == "torch" || key == "end") continue;
    int t = 0;
    if (key == "dtype") {
      r.emplace_back();
      in >> r.back().dtype;
    } else if (key == "large") {
      r.emplace_back();
      BitsProblem& p = r.back();
      std::string k;
      p.large = true;
      in >> p.dtype >> k >> p.n >> k >> p.steps >> k >> p.seed;
      draw_large(p);
    } else if (key == "hashes") {
      BitsCase& c = r.back().cases.back();
      std::string k;
      int64_t count = 0;
      in >> k >> count;
      for (int64_t i = 0; i < count; ++i) c.params_hash.push_back(read_hex(in));
      in >> k;
      c.exp_avg_hash = read_hex(in);
      in >> k;
      c.exp_avg_sq_hash = read_hex(in);
    } else if (key == "init") {
      r.back().init = read_values(in, key);
    } else if (key == "grad") {
      in >> t;
      r.back().grads.push_back(read_values(in, key));
    } else if (key == "case") {
      BitsCase c;
      in >> c.name >> c.kind;
      std::string k;
      while (in >> k && k != "lrs") in >> c.hyper[k];
      c.lrs = read_values(in, "lrs");
      r.back().cases.push_back(c);
    } else if (key == "params") {
      in >> t;
      r.back().cases.back().params.push_back(read_values(in, key));
    } else if (key == "exp_avg") {
      r.back().cases.back().exp_avg = read_values(in, key);
    } else if (key == "exp_avg_sq") {
      r.back().cases.back().exp_avg_sq = read_values(in, key);
    } else {
      throw std::runtime_error("optim_bits_reference.txt: unknown record " + key);
    }
  }
  return r;
}

// Bitwise: the same value and the same sign of zero (NaN never occurs here).
template <class T>
int64_t count_bit_differences(const std::vector<T>& got, const std::vector<double>& want) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const T w = T(want[i]);
    bad += std::memcmp(&got[i], &w, sizeof(T)) != 0;
  }
  return bad;
}

template <class T>
std::unique_ptr<Optimizer<T>> make_bits_optimizer(const BitsCase& c, int64_t n) {
  const auto& h = c.hyper;
  if (c.kind == "adamw")
    return std::make_unique<AdamW<T>>(n, AdamWHyper{h.at("lr"), h.at("beta1"), h.at("beta2"), h.at("eps"), h.at("weight_decay")});
  return std::make_unique<Adam<T>>(n, AdamHyper{h.at("lr"), h.at("beta1"), h.at("beta2"), h.at("eps"), h.at("weight_decay")});
}

template <class T>
uint64_t hash_of(const T* x, int64_t n) {
  return fnv1a64(x, sizeof(T) * size_t(n));  // little-endian bytes, as the generator's numpy
}

// Largest |a - b| / max(1, |b|), element by element.
template <class T>
double max_rel_error(const std::vector<T>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]) / std::max(1.0, std::fabs(b[i])));
  return worst;
}

// AdamW: every parameter after every step and the final state are PyTorch's bits. Adam keeps
// the arithmetic hddp's Adam always had (products rounded on their own): within 1e-6 (float) or
// 1e-12 (double) of PyTorch's fused kernels after every step, the tolerance of the other
// trajectory tests, value by value (the hashed problems hold no values: AdamW only).
template <class T>
void run_bits(const BitsProblem& p) {
  const int64_t n = int64_t(p.init.size());
  ASSERT_EQ(p.cases.size(), 6u);
  for (const BitsCase& c : p.cases) {
    SCOPED_TRACE(c.name + " " + p.dtype + (p.large ? " large" : ""));
    const bool exact = c.kind == "adamw";
    if (p.large && !exact) continue;
    auto opt = make_bits_optimizer<T>(c, n);
    EXPECT_STREQ(opt->kind(), c.kind.c_str());
    std::vector<T> params(p.init.begin(), p.init.end());
    ASSERT_EQ(p.large ? c.params_hash.size() : c.params.size(), p.grads.size());
    for (size_t s = 0; s < p.grads.size(); ++s) {
      const std::vector<T> g(p.grads[s].begin(), p.grads[s].end());
      opt->set_lr(c.lrs[s]);  // through the base class, as a schedule does
      opt->step(params.data(), g.data());
      if (p.large) ASSERT_EQ(hash_of(params.data(), n), c.params_hash[s]) << "step " << s + 1;
      else if (exact) ASSERT_EQ(count_bit_differences(params, c.params[s]), 0) << "step " << s + 1;
      else ASSERT_LE(max_rel_error(params, c.params[s]), sizeof(T) == 4 ? 1e-6 : 1e-12) << "step " << s + 1;
    }
    auto st = opt->state();
    ASSERT_EQ(st.size(), 2u);
    if (p.large) {
      EXPECT_EQ(hash_of(st[0].data, n), c.exp_avg_hash) << "exp_avg";
      EXPECT_EQ(hash_of(st[1].data, n), c.exp_avg_sq_hash) << "exp_avg_sq";
    } else if (exact) {
      EXPECT_EQ(count_bit_differences(std::vector<T>(st[0].data, st[0].data + n), c.exp_avg), 0) << "exp_avg";
      EXPECT_EQ(count_bit_differences(std::vector<T>(st[1].data, st[1].data + n), c.exp_avg_sq), 0) << "exp_avg_sq";
    }
  }
}

// PyTorch's trajectories (its AVX2/AVX-512 CPU kernels, gen_optim_kit_reference.py): Adam
// without and with weight decay, AdamW with the default, no, strong weight decay and a learning
// rate changed before every step; 40 values compared one by one, 4101 by hash (enough values
// for any systematic rounding difference to show: rounding the fused products separately
// changes about one value in two hundred per step).
TEST(OptimBits, AdamWEqualsPyTorchBitwiseAdamWithinUlps) {
  const std::vector<BitsProblem> problems = load_bits();
  ASSERT_EQ(problems.size(), 4u);  // {values, hashes} x {float32, float64}
  for (const BitsProblem& p : problems) {
    ASSERT_EQ(p.grads.size(), 6u);
    if (p.dtype == "float32") run_bits<float>(p);
    else run_bits<double>(p);
  }
}

// ---- AdamW: validation, state, save/load ----

TEST(OptimAdamW, InvalidHyperParametersNameTheParameter) {
  auto adamw = [](AdamWHyper h) { return error_of([&] { AdamW<float>(10, h); }); };
  AdamWHyper a;
  EXPECT_EQ(a.weight_decay, 1e-2);  // PyTorch's default
  EXPECT_EQ(adamw(a), "no std::invalid_argument");
  a.lr = 0;
  EXPECT_NE(adamw(a).find("AdamW: lr must be finite and > 0, got 0"), std::string::npos) << adamw(a);
  a = {}, a.lr = std::numeric_limits<double>::infinity();
  EXPECT_NE(adamw(a).find("AdamW: lr must be finite and > 0, got inf"), std::string::npos) << adamw(a);
  a = {}, a.lr = std::nan("");
  EXPECT_NE(adamw(a).find("AdamW: lr must be"), std::string::npos) << adamw(a);
  a = {}, a.beta1 = 1.0;
  EXPECT_NE(adamw(a).find("AdamW: beta1 must be in [0, 1), got 1"), std::string::npos) << adamw(a);
  a = {}, a.beta2 = -0.1;
  EXPECT_NE(adamw(a).find("AdamW: beta2 must be in [0, 1), got -0.1"), std::string::npos) << adamw(a);
  a = {}, a.eps = -1e-8;
  EXPECT_NE(adamw(a).find("AdamW: eps must be finite and >= 0"), std::string::npos) << adamw(a);
  a = {}, a.weight_decay = -0.1;
  EXPECT_NE(adamw(a).find("AdamW: weight_decay must be finite and >= 0, got -0.1"), std::string::npos) << adamw(a);
  a = {}, a.weight_decay = std::numeric_limits<double>::infinity();
  EXPECT_NE(adamw(a).find("AdamW: weight_decay must be finite and >= 0, got inf"), std::string::npos) << adamw(a);
  a = {}, a.lr = 0.5, a.weight_decay = 2;
  EXPECT_NE(adamw(a).find("AdamW: lr * weight_decay must be < 1"), std::string::npos) << adamw(a);
  EXPECT_NE(adamw(a).find("got lr 0.5 and weight_decay 2"), std::string::npos) << adamw(a);
  a = {}, a.weight_decay = 0;
  EXPECT_EQ(adamw(a), "no std::invalid_argument");
  EXPECT_NE(error_of([] { AdamW<float>(0, {}); }).find("number of parameters"), std::string::npos);

  // set_lr validates with the other settings: lr 20 with weight_decay 0.1 decays by 1 - 2.
  AdamW<double> ok(4, {.lr = 1e-3, .weight_decay = 0.1});
  Optimizer<double>& base = ok;
  EXPECT_NE(error_of([&] { base.set_lr(20); }).find("lr * weight_decay must be < 1"), std::string::npos);
  EXPECT_THROW(base.set_lr(0), std::invalid_argument);
  EXPECT_EQ(base.lr(), 1e-3);  // unchanged by the refused updates
  base.set_lr(0.5);
  EXPECT_EQ(ok.hyper().lr, 0.5);
}

TEST(OptimAdamW, LrThroughTheBaseClass) {
  Adam<float> adam(2, {});
  SGD<float> sgd(2, SgdHyper{});
  AdamW<float> adamw(2, {});
  for (Optimizer<float>* o : {static_cast<Optimizer<float>*>(&adam), static_cast<Optimizer<float>*>(&sgd),
                              static_cast<Optimizer<float>*>(&adamw)}) {
    o->set_lr(0.125);
    EXPECT_EQ(o->lr(), 0.125) << o->kind();
    EXPECT_THROW(o->set_lr(-1), std::invalid_argument) << o->kind();
    EXPECT_EQ(o->lr(), 0.125) << o->kind();
  }
  EXPECT_EQ(adam.hyper().lr, 0.125);
  EXPECT_EQ(sgd.hyper().lr, 0.125);
  EXPECT_EQ(adamw.hyper().lr, 0.125);
}

TEST(OptimAdamW, StateAndDecoupledDecay) {
  AdamW<double> a(3, {.lr = 0.1, .weight_decay = 0.5});
  EXPECT_STREQ(a.kind(), "adamw");
  std::vector<double> p = {1, 2, 3}, zero = {0, 0, 0};
  a.step(p.data(), zero.data());  // no gradient: only the decay moves the parameters
  EXPECT_EQ(p, (std::vector<double>{0.95, 1.9, 1.0 * 3 * 0.95}));
  auto st = a.state();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].name, "exp_avg");
  EXPECT_EQ(st[1].name, "exp_avg_sq");
  EXPECT_EQ(st[0].size, 3);
  EXPECT_EQ(st[0].data[0], 0.0);  // the decay never enters the moments (Adam's L2 term would)
  EXPECT_EQ(a.steps(), 1);
}

class OptimAdamWFiles : public hddp::testing_util::TempDirTest {};

// Three steps, save, load into a fresh AdamW, three more: the same bits as six uninterrupted.
TEST_F(OptimAdamWFiles, SaveLoadContinuesBitwise) {
  const AdamWHyper h{.lr = 0.02, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-7, .weight_decay = 0.05};
  auto make_arena = [] {
    ParamArena<float> a;
    a.add("w", 5, 7);
    a.add("b", 1, 7);
    for (int64_t i = 0; i < a.size(); ++i) a.params()[i] = float(((i * 37 + 11) % 29) - 14) / 16.f;
    return a;
  };
  auto set_grads = [](ParamArena<float>& a, int step) {
    for (int64_t i = 0; i < a.size(); ++i) a.grads()[i] = float(((i * 13 + step * 7) % 23) - 11) / 64.f;
  };
  ParamArena<float> straight = make_arena(), first = make_arena(), second = make_arena();
  AdamW<float> o_straight(straight.size(), h), o_first(first.size(), h), o_second(second.size(), h);
  for (int s = 1; s <= 6; ++s) set_grads(straight, s), o_straight.step(straight);
  for (int s = 1; s <= 3; ++s) set_grads(first, s), o_first.step(first);
  const std::string p = path("adamw.hddp");
  save_state(p, first, &o_first);
  load_state(p, second, &o_second);
  EXPECT_EQ(o_second.steps(), 3);
  for (int s = 4; s <= 6; ++s) set_grads(second, s), o_second.step(second);
  EXPECT_EQ(std::memcmp(second.params(), straight.params(), sizeof(float) * size_t(straight.size())), 0);
  EXPECT_EQ(o_second.exp_avg(), o_straight.exp_avg());
  EXPECT_EQ(o_second.exp_avg_sq(), o_straight.exp_avg_sq());

  // Adam's state has the same buffers, but not the same meaning: refused both ways, naming both.
  Adam<float> adam(first.size(), {});
  const std::string q = path("adam.hddp");
  save_state(q, first, &adam);
  auto load_error = [&](const std::string& file, Optimizer<float>& o) {
    ParamArena<float> a = make_arena();
    try {
      load_state(file, a, &o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no hddp::Error");
  };
  EXPECT_NE(load_error(q, o_second).find("the file has adam optimizer state, the optimizer is adamw"), std::string::npos)
      << load_error(q, o_second);
  EXPECT_NE(load_error(p, adam).find("the file has adamw optimizer state, the optimizer is adam"), std::string::npos)
      << load_error(p, adam);
}

// ---- clip_grad_norm against torch.nn.utils.clip_grad_norm_ (clip_reference.txt) ----

struct ClipCase {
  std::string name, dtype;
  double max_norm = 0, total_norm = 0;
  std::vector<double> grad, clipped;
};

std::vector<ClipCase> load_clip() {
  std::ifstream f = open_data("clip_reference.txt");
  std::vector<ClipCase> r;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key, k;
    if (!(in >> key) || key[0] == '#' || key == "torch" || key == "end") continue;
    if (key == "case") {
      r.emplace_back();
      in >> r.back().name >> r.back().dtype >> k >> r.back().max_norm;
    } else if (key == "grad") {
      r.back().grad = read_values(in, key);
    } else if (key == "total_norm") {
      in >> r.back().total_norm;
    } else if (key == "clipped") {
      r.back().clipped = read_values(in, key);
    } else {
      throw std::runtime_error("clip_reference.txt: unknown record " + key);
    }
  }
  return r;
}

// Distance in units in the last place of T (same sign; 0 for equal bits).
template <class T>
int64_t ulps(T a, T b) {
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  return std::abs(int64_t(std::bit_cast<I>(a)) - int64_t(std::bit_cast<I>(b)));
}

// The norm: hddp sums squares in double (eight lanes), PyTorch in T per tensor and then over
// the tensors' norms, so the two differ by rounding: measured 1 ulp of T at most in float32 (where
// PyTorch's own is up to 1 ulp from the exact norm) and in float64; allowed 2. The clipped
// values: the coefficient follows PyTorch's T arithmetic from the norm rounded to T, so they are
// PyTorch's bits whenever the two norms agree in T (5 of the 8 clipped cases), else a coefficient
// an ulp apart moves them by up to 2 ulps of T (measured 2; allowed 2).
template <class T>
void run_clip(const ClipCase& c) {
  SCOPED_TRACE(c.name + " " + c.dtype);
  std::vector<T> g(c.grad.begin(), c.grad.end());
  const double norm = clip_grad_norm(int64_t(g.size()), g.data(), c.max_norm);
  EXPECT_LE(ulps(T(norm), T(c.total_norm)), 2) << norm << " vs PyTorch " << c.total_norm;
  const bool same_norm = T(norm) == T(c.total_norm);
  int64_t worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, ulps(g[i], T(c.clipped[i])));
  EXPECT_LE(worst, same_norm ? 0 : 2) << "clipped values, norm " << (same_norm ? "equal" : "differs");
  if (c.max_norm > c.total_norm + 1e-6) {  // not clipped: untouched
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], T(c.grad[i]));
  }
}

TEST(ClipGradNorm, MatchesPyTorch) {
  const std::vector<ClipCase> cases = load_clip();
  ASSERT_EQ(cases.size(), 12u);  // 6 x {float32, float64}
  int clipped = 0, kept = 0;
  for (const ClipCase& c : cases) {
    if (c.dtype == "float32") run_clip<float>(c);
    else run_clip<double>(c);
    (c.clipped != c.grad ? clipped : kept) += 1;
  }
  EXPECT_EQ(kept, 4);  // mlp_not_clipped and larger_tiny_grads, both dtypes
  EXPECT_EQ(clipped, 8);
}

TEST(ClipGradNorm, EdgesAndValidation) {
  // Below max_norm the gradients keep their bits (-0 stays -0); above, the norm becomes
  // max_norm (to rounding) and the returned norm is the one before.
  std::vector<float> g = {3, -0.f, 4};
  EXPECT_EQ(clip_grad_norm(3, g.data(), 10.0), 5.0);
  EXPECT_EQ(g, (std::vector<float>{3, 0, 4}));
  EXPECT_TRUE(std::signbit(g[1]));
  EXPECT_EQ(clip_grad_norm(3, g.data(), 1.0), 5.0);
  EXPECT_NEAR(std::sqrt(double(g[0]) * g[0] + double(g[2]) * g[2]), 1.0, 1e-6);
  EXPECT_EQ(clip_grad_norm(0, g.data(), 1.0), 0.0);  // nothing: norm 0, nothing scaled

  // Non-finite gradients, as PyTorch (error_if_nonfinite=False): Inf -> coefficient 0 (the
  // finite ones become 0, the Inf NaN), NaN -> NaN everywhere.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> h = {1, inf, 2};
  EXPECT_EQ(clip_grad_norm(3, h.data(), 1.0), double(inf));
  EXPECT_EQ(h[0], 0.f);
  EXPECT_TRUE(std::isnan(h[1]));
  std::vector<double> q = {1, std::nan(""), 2};
  EXPECT_TRUE(std::isnan(clip_grad_norm(3, q.data(), 1.0)));
  for (double x : q) EXPECT_TRUE(std::isnan(x));

  EXPECT_NE(error_of([&] { clip_grad_norm(3, g.data(), 0.0); }).find("clip_grad_norm: max_norm must be finite and > 0, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { clip_grad_norm(3, g.data(), -1.0); }).find("max_norm must be finite and > 0, got -1"),
            std::string::npos);
  EXPECT_NE(error_of([&] { clip_grad_norm(3, g.data(), double(inf)); }).find("max_norm must be finite and > 0, got inf"),
            std::string::npos);
  EXPECT_NE(error_of([&] { clip_grad_norm(-1, g.data(), 1.0); }).find("clip_grad_norm: n must be >= 0, got -1"),
            std::string::npos);
}

// Above the kernels' parallel threshold: the same norm and values for 1 and 2 threads.
TEST(ClipGradNorm, IndependentOfThreads) {
  const int64_t n = (int64_t(1) << 17) + 3;
  std::vector<float> g0(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) g0[size_t(i)] = float((i * 7919) % 2001 - 1000) / 4096.f;
  const int saved = omp_get_max_threads();
  std::vector<float> g1 = g0, g2 = g0;
  omp_set_num_threads(1);
  const double n1 = clip_grad_norm(n, g1.data(), 1.0);
  omp_set_num_threads(2);
  const double n2 = clip_grad_norm(n, g2.data(), 1.0);
  omp_set_num_threads(saved);
  EXPECT_EQ(n1, n2);
  EXPECT_EQ(g1, g2);
  EXPECT_NE(g1, g0);
}

}  // namespace
