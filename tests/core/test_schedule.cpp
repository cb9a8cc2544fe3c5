// Learning-rate schedules (core/schedule.h) against PyTorch 1.13's schedulers: the learning rate
// of each of 25 optimizer steps under LinearLR warmup, StepLR, CosineAnnealingLR and
// SequentialLR (tests/core/data/schedule_reference.txt, made by gen_optim_kit_reference.py).
// Also the parser, the validation messages, and that the rate depends on the step count alone.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/optim.h>
#include <hddp/core/schedule.h>
#include "tests/common/testing.h"

#ifndef HDDP_CORE_TEST_DATA
#error "HDDP_CORE_TEST_DATA must name tests/core/data"
#endif

using namespace hddp;
using hddp::testing_util::error_of;

namespace {

struct SchedCase {
  std::string name, kind, spec;
  double base_lr = 0, start_factor = 0, gamma = 0, eta_min = 0;
  int64_t warmup = 0, step_size = 0, t_max = 0, total = 0;
  std::vector<double> lrs;  // PyTorch's, per step
};

std::vector<SchedCase> load_cases() {
  const std::string path = std::string(HDDP_CORE_TEST_DATA) + "/schedule_reference.txt";
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<SchedCase> r;
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key, k;
    if (!(in >> key) || key[0] == '#' || key == "torch") continue;
    if (key == "case") {
      SchedCase c;
      in >> c.name >> k >> c.kind >> k >> c.base_lr >> k >> c.warmup >> k >> c.start_factor >> k >> c.step_size >> k >>
          c.gamma >> k >> c.t_max >> k >> c.eta_min >> k >> c.spec >> k >> c.total;
      if (!in) throw std::runtime_error("schedule_reference.txt: bad case line");
      r.push_back(c);
    } else if (key == "lr") {
      int64_t n = 0;
      in >> n;
      r.back().lrs.resize(size_t(n));
      for (double& x : r.back().lrs) in >> x;
      if (!in) throw std::runtime_error("schedule_reference.txt: short lr line");
    } else {
      throw std::runtime_error("schedule_reference.txt: unknown record " + key);
    }
  }
  return r;
}

LrSchedule build(const SchedCase& c) {
  LrSchedule s = c.kind == "step"     ? LrSchedule::step(c.base_lr, c.step_size, c.gamma)
                 : c.kind == "cosine" ? LrSchedule::cosine(c.base_lr, c.t_max, c.eta_min)
                                      : LrSchedule::constant(c.base_lr);
  return s.with_warmup(c.warmup, c.start_factor);
}

// Distance in ulps of double between two values of the same sign (0 for equal bits).
int64_t ulps(double a, double b) {
  if (a == b) return 0;
  return std::abs(std::bit_cast<int64_t>(a) - std::bit_cast<int64_t>(b));
}

// lr_at's closed forms against PyTorch's chained recursion: the chain rounds once or twice per
// step, so after tens of steps the two differ by a few ulps of double. Measured over these 13
// schedules x 25 steps (181 of the 325 rates equal): at most 4 ulps within T_max; allowed 8.
// Past T_max PyTorch's cosine takes its (2k+1) T_max branch, eta_min + (base - eta_min)(1 -
// cos(pi / T)) / 2, where the closed form has 1 + cos(pi (T + 1) / T): the rounding of that
// argument moves the small rate at k = T + 1 by ~25 ulps, and the chain carries the relative
// error on. Measured 34 ulps there; allowed 48.
constexpr int64_t kMaxUlps = 8, kMaxUlpsPastTMax = 48;

TEST(LrSchedule, MatchesPyTorchSchedulers) {
  const std::vector<SchedCase> cases = load_cases();
  ASSERT_EQ(cases.size(), 13u);
  int64_t worst = 0, exact = 0, total = 0, parsed = 0;
  for (const SchedCase& c : cases) {
    SCOPED_TRACE(c.name);
    ASSERT_EQ(c.lrs.size(), 25u);
    const LrSchedule s = build(c);
    for (size_t t = 0; t < c.lrs.size(); ++t) {
      const double got = s.lr_at(int64_t(t)), want = c.lrs[t];
      const int64_t d = ulps(got, want);
      const bool past_t_max = c.kind == "cosine" && int64_t(t) - c.warmup > c.t_max;
      EXPECT_LE(d, past_t_max ? kMaxUlpsPastTMax : kMaxUlps) << "step " << t << ": " << got << " vs PyTorch " << want;
      worst = std::max(worst, d);
      exact += d == 0;
      ++total;
    }
    if (c.spec != "-") {  // the command line's way to the same schedule
      EXPECT_EQ(parse_lr_schedule(c.spec, c.base_lr, c.total, c.warmup), s) << c.spec;
      ++parsed;
    }
  }
  EXPECT_EQ(parsed, 10);
  std::printf("lr schedules vs PyTorch: %lld of %lld rates equal, at most %lld ulps apart\n", (long long)exact,
              (long long)total, (long long)worst);
}

// The closed forms where they are exact: the warmup starts at base_lr * start_factor and ends at
// base_lr, the main schedule starts at base_lr, cosine reaches eta_min at T_max and is periodic.
TEST(LrSchedule, ClosedFormLandmarks) {
  const LrSchedule w = LrSchedule::constant(0.3).with_warmup(4, 0.25);
  EXPECT_EQ(w.lr_at(0), 0.3 * 0.25);
  EXPECT_EQ(w.lr_at(2), 0.3 * (0.25 + (0.75 * 2) / 4));
  EXPECT_EQ(w.lr_at(4), 0.3);
  EXPECT_EQ(w.lr_at(1000000), 0.3);

  const LrSchedule s = LrSchedule::step(0.1, 3, 0.5).with_warmup(2);
  EXPECT_EQ(s.lr_at(0), 0.1 / 3);
  EXPECT_EQ(s.lr_at(2), 0.1);  // the main schedule's count starts at 0 at the milestone
  EXPECT_EQ(s.lr_at(4), 0.1);
  EXPECT_EQ(s.lr_at(5), 0.05);
  EXPECT_EQ(s.lr_at(2 + 3 * 4), 0.1 / 16);

  const LrSchedule c = LrSchedule::cosine(0.2, 10, 0.01);
  EXPECT_EQ(c.lr_at(0), 0.2);
  EXPECT_EQ(c.lr_at(10), 0.01);
  EXPECT_NEAR(c.lr_at(5), 0.105, 1e-16);
  EXPECT_EQ(c.lr_at(20), c.lr_at(0));  // period 2 T_max, as PyTorch's
  EXPECT_NEAR(c.lr_at(13), c.lr_at(27), 1e-16);
  for (int64_t t = 0; t < 10; ++t) EXPECT_GT(c.lr_at(t), c.lr_at(t + 1)) << t;

  EXPECT_NE(error_of([&] { c.lr_at(-1); }).find("LrSchedule: the step count must be >= 0, got -1"), std::string::npos);
}

// A pure function of the optimizer's step count: apply() before each step sets lr_at(steps()),
// and an optimizer resumed at step t (as load_state leaves it) gets the same rates onwards.
TEST(LrSchedule, AppliedFromTheStepCounter) {
  const LrSchedule s = parse_lr_schedule("cosine:0.0001", 0.01, 12, 3);
  std::vector<float> p(5, 1.f), g(5, 0.5f);
  AdamW<float> straight(5, {});
  std::vector<double> seen;
  for (int i = 0; i < 12; ++i) {
    s.apply(straight);
    seen.push_back(straight.lr());
    straight.step(p.data(), g.data());
  }
  for (int64_t t = 0; t < 12; ++t) EXPECT_EQ(seen[size_t(t)], s.lr_at(t)) << t;
  EXPECT_EQ(seen[0], 0.01 * (1.0 / 3));
  EXPECT_EQ(seen[3], 0.01);

  SGD<double> resumed(5, SgdHyper{});
  resumed.set_steps(7);
  s.apply(resumed);
  EXPECT_EQ(resumed.lr(), seen[7]);
  // The closed form, independently: step 7 is the cosine's step 4 of 9 (12 total, 3 warmup), from
  // 0.01 to 0.0001. Asked after other steps, it is still that value: no hidden state.
  const double lr7 = 0.0001 + 0.5 * (0.01 - 0.0001) * (1 + std::cos(4 * 3.14159265358979323846 / 9));
  EXPECT_NEAR(seen[7], lr7, 1e-17);
  (void)s.lr_at(11), (void)s.lr_at(0);
  EXPECT_NEAR(s.lr_at(7), lr7, 1e-17);
  const LrSchedule copy = s;
  EXPECT_EQ(copy, s);
  EXPECT_EQ(copy.lr_at(11), seen[11]);
}

TEST(LrSchedule, ParserBuildsEachKind) {
  const LrSchedule c = parse_lr_schedule("constant", 0.5, 100, 0);
  EXPECT_EQ(c.kind(), LrSchedule::Kind::Constant);
  EXPECT_EQ(c.warmup_steps(), 0);
  EXPECT_EQ(c, LrSchedule::constant(0.5));

  const LrSchedule s = parse_lr_schedule("step:30:0.1", 0.5, 100, 10);
  EXPECT_EQ(s.kind(), LrSchedule::Kind::Step);
  EXPECT_EQ(s.step_size(), 30);
  EXPECT_EQ(s.gamma(), 0.1);
  EXPECT_EQ(s.warmup_steps(), 10);
  EXPECT_EQ(s.warmup_start_factor(), 1.0 / 3);

  const LrSchedule k = parse_lr_schedule("cosine", 0.5, 100, 10);
  EXPECT_EQ(k.kind(), LrSchedule::Kind::Cosine);
  EXPECT_EQ(k.t_max(), 90);  // total - warmup
  EXPECT_EQ(k.eta_min(), 0.0);
  EXPECT_EQ(parse_lr_schedule("cosine:1e-3", 0.5, 100, 0).eta_min(), 1e-3);
  EXPECT_EQ(parse_lr_schedule("cosine:1e-3", 0.5, 100, 0).t_max(), 100);
  // Steps past the run's last: cosine rises again (PyTorch's); within the run the rate stays > 0.
  for (int64_t t = 0; t < 100; ++t) EXPECT_GT(k.lr_at(t), 0.0) << t;
  EXPECT_EQ(k.lr_at(100), 0.0);

  EXPECT_EQ(to_string(k), "cosine base_lr=0.5 t_max=90 eta_min=0 warmup=10 start_factor=0.3333333333333333");
  EXPECT_EQ(to_string(s), "step base_lr=0.5 step_size=30 gamma=0.1 warmup=10 start_factor=0.3333333333333333");
  EXPECT_EQ(to_string(c), "constant base_lr=0.5");
}

// Every refusal names the spec and what is wrong.
TEST(LrSchedule, ParserRefusesBadSpecs) {
  struct Bad {
    std::string spec;
    double base;
    int64_t total, warmup;
    std::string message;
  };
  const std::vector<Bad> bad = {
      {"", 0.1, 100, 0, "lr schedule '': empty (expected constant, step:STEP_SIZE:GAMMA, cosine or cosine:ETA_MIN)"},
      {"linear", 0.1, 100, 0, "lr schedule 'linear': unknown kind 'linear' (expected constant, step:STEP_SIZE:GAMMA"},
      {"Cosine", 0.1, 100, 0, "lr schedule 'Cosine': unknown kind 'Cosine'"},
      {"constant:1", 0.1, 100, 0, "lr schedule 'constant:1': constant takes no parameters"},
      {"step", 0.1, 100, 0, "lr schedule 'step': expected step:STEP_SIZE:GAMMA"},
      {"step:10", 0.1, 100, 0, "lr schedule 'step:10': expected step:STEP_SIZE:GAMMA"},
      {"step:10:0.5:1", 0.1, 100, 0, "lr schedule 'step:10:0.5:1': expected step:STEP_SIZE:GAMMA"},
      {"step:0:0.5", 0.1, 100, 0, "lr schedule 'step:0:0.5': STEP_SIZE must be an integer >= 1, got '0'"},
      {"step:2.5:0.5", 0.1, 100, 0, "lr schedule 'step:2.5:0.5': STEP_SIZE must be an integer >= 1, got '2.5'"},
      {"step::0.5", 0.1, 100, 0, "STEP_SIZE must be an integer >= 1, got ''"},
      {"step:10:0", 0.1, 100, 0, "lr schedule 'step:10:0': GAMMA must be a finite number > 0, got '0'"},
      {"step:10:-0.5", 0.1, 100, 0, "GAMMA must be a finite number > 0, got '-0.5'"},
      {"step:10:inf", 0.1, 100, 0, "GAMMA must be a finite number > 0, got 'inf'"},
      {"step:10:0.5x", 0.1, 100, 0, "GAMMA must be a finite number > 0, got '0.5x'"},
      {"step:10: 0.5", 0.1, 100, 0, "GAMMA must be a finite number > 0, got ' 0.5'"},
      {"cosine:1:2", 0.1, 100, 0, "lr schedule 'cosine:1:2': expected cosine or cosine:ETA_MIN"},
      {"cosine:", 0.1, 100, 0, "lr schedule 'cosine:': ETA_MIN must be a number in [0, the base learning rate 0.1), got ''"},
      {"cosine:-1e-4", 0.1, 100, 0, "ETA_MIN must be a number in [0, the base learning rate 0.1), got '-1e-4'"},
      {"cosine:0.1", 0.1, 100, 0, "ETA_MIN must be a number in [0, the base learning rate 0.1), got '0.1'"},
      {"cosine:nan", 0.1, 100, 0, "ETA_MIN must be a number in [0, the base learning rate 0.1), got 'nan'"},
      {"cosine", 0.1, 100, 100, "lr schedule 'cosine': cosine anneals over the steps after the warmup: needs more total "
                                "steps than warmup steps, got 100 total and 100 warmup"},
      {"constant", 0.0, 100, 0, "lr schedule 'constant': the base learning rate must be finite and > 0, got 0"},
      {"constant", 0.1, 0, 0, "lr schedule 'constant': the total number of steps must be >= 1, got 0"},
      {"step:1:0.5", 0.1, 100, -1, "lr schedule 'step:1:0.5': the number of warmup steps must be >= 0, got -1"},
  };
  for (const Bad& b : bad) {
    const std::string e = error_of([&] { parse_lr_schedule(b.spec, b.base, b.total, b.warmup); });
    EXPECT_NE(e.find(b.message), std::string::npos) << "spec '" << b.spec << "': " << e;
  }
  // A warmup longer than the run is no error for constant and step (the main schedule never starts).
  EXPECT_EQ(parse_lr_schedule("constant", 0.1, 10, 20).lr_at(9), 0.1 * (1.0 / 3 + ((1 - 1.0 / 3) * 9) / 20));
}

TEST(LrSchedule, FactoriesRefuseBadValues) {
  EXPECT_NE(error_of([] { LrSchedule::constant(-1); }).find("LrSchedule: base_lr must be finite and > 0, got -1"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::constant(INFINITY); }).find("base_lr must be finite and > 0, got inf"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::step(0.1, 0, 0.5); }).find("LrSchedule: step_size must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::step(0.1, 1, 0); }).find("LrSchedule: gamma must be finite and > 0, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::cosine(0.1, 0); }).find("LrSchedule: t_max must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::cosine(0.1, 5, 0.2); }).find("LrSchedule: eta_min must be in [0, base_lr 0.1), got 0.2"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::constant(0.1).with_warmup(-2); }).find("LrSchedule: warmup steps must be >= 0, got -2"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::constant(0.1).with_warmup(5, 0.0); })
                .find("LrSchedule: warmup start_factor must be in (0, 1], got 0"),
            std::string::npos);
  EXPECT_NE(error_of([] { LrSchedule::constant(0.1).with_warmup(5, 1.5); }).find("start_factor must be in (0, 1], got 1.5"),
            std::string::npos);
  EXPECT_EQ(error_of([] { LrSchedule::constant(0.1).with_warmup(0, 1.0); }), "no std::invalid_argument");
}

}  // namespace

TEST(LrSchedule, WarmupCosineIsTheCosineOverWhatTheWarmupLeaves) {
  const LrSchedule a = LrSchedule::warmup_cosine(1e-3, 10, 100, 1e-5);
  const LrSchedule b = LrSchedule::cosine(1e-3, 90, 1e-5).with_warmup(10);
  for (int64_t t = 0; t <= 100; ++t) EXPECT_EQ(a.lr_at(t), b.lr_at(t)) << t;
  EXPECT_LT(a.lr_at(0), a.lr_at(9)) << "warming up";
  EXPECT_NEAR(a.lr_at(100), 1e-5, 1e-12) << "the cosine ends at eta_min";
  EXPECT_THROW(LrSchedule::warmup_cosine(1e-3, 100, 100), std::invalid_argument);
  EXPECT_THROW(LrSchedule::warmup_cosine(1e-3, -1, 100), std::invalid_argument);
}
