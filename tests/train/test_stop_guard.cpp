// The stop guard (train/stop_guard.h) and the exit codes (train/exit_code.h): a signal sets
// the stop flag and every rank's verdict (raised on the last rank only, seen by all), a
// non-finite loss, a non-finite local gradient and non-finite averaged gradients each give the
// non-finite verdict on every rank, and the codes a program returns. Signals are raised within
// the process (raise()), nothing depends on timing: every check is asked to agree now.
#include <gtest/gtest.h>

#include <csignal>
#include <cmath>
#include <limits>
#include <string>

#include <hddp/core/model.h>
#include <hddp/distributed/ddp.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/exit_code.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/run_file.h>
#include <hddp/train/stop_guard.h>
#include "tests/train/train_testing.h"

using namespace hddp;
using hddp::testing::env;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The smallest model the data-parallel wrapper takes: one arena, a backward that writes the
// gradients it is given and tells the hook they are final.
class Tiny final : public Module<float> {
 public:
  Tiny() {
    arena_.add("0.weight", 2, 3);
    arena_.add("0.bias", 1, 3);
  }
  ParamArena<float>& arena() override { return arena_; }
  void set_backward_hook(BackwardHook hook) override { hook_ = std::move(hook); }
  // The next backward's gradients: g everywhere, except `bad` at offset `at` (when at >= 0).
  void set(float g, int64_t at = -1, float bad = 0) { g_ = g, at_ = at, bad_ = bad; }
  // Writes them (dY unused); the bias (offsets 6..8) becomes final first, then the weight, as
  // a Sequential's backward reports them.
  void backward(const float*) override {
    for (int64_t i = 0; i < arena_.size(); ++i) arena_.grads()[i] = i == at_ ? bad_ : g_;
    if (!hook_) return;
    hook_(1, 6);
    hook_(0, 0);
  }

 private:
  ParamArena<float> arena_;
  BackwardHook hook_;
  float g_ = 0.5f, bad_ = 0;
  int64_t at_ = -1;
};

struct Fixture : ::testing::Test {
  Watchdog wd{MPI_COMM_WORLD, {.timeout_s = 60}};
  Tiny model;
  DistributedModel ddp{MPI_COMM_WORLD, model};
  void SetUp() override { ddp.set_check_finite(true); }
  StopGuard guard(int64_t start = 0) {
    return StopGuard(env(), wd, {.program = "test", .total_steps = 100, .check_every = 0, .where = nullptr}, start, [] { return std::string(" (kept)"); });
  }
  bool last_rank() const { return env().rank() == env().size() - 1; }
};

using StopGuardTest = Fixture;

TEST_F(StopGuardTest, FiniteStepsGiveNoVerdict) {
  StopGuard g = guard();
  for (int64_t step = 0; step < 3; ++step) {
    model.set(0.5f), ddp.backward(nullptr);
    const StopGuard::Verdict v = g.check(step, 1.0, ddp, /*agree_now=*/true);
    EXPECT_EQ(v.signal, 0);
    EXPECT_FALSE(v.non_finite);
  }
  EXPECT_EQ(g.where(4), "step 5");
}

// A NaN loss on the last rank only: every rank stops, rank 0 names that rank and the step.
TEST_F(StopGuardTest, NonFiniteLossStopsEveryRank) {
  StopGuard g = guard(7);
  model.set(0.5f), ddp.backward(nullptr);
  ::testing::internal::CaptureStderr();
  const StopGuard::Verdict v = g.check(7, last_rank() ? double(kNaN) : 1.0, ddp, true);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(v.non_finite);
  EXPECT_EQ(v.signal, 0);
  if (last_rank()) {
    EXPECT_NE(said.find("non-finite value at step 8: loss = nan"), std::string::npos) << said;
  }
  if (env().root()) {
    EXPECT_NE(said.find("test: error: NaN/Inf at step 8 on rank " + std::to_string(env().size() - 1)), std::string::npos)
        << said;
  }
  EXPECT_EQ(code(Exit::NonFinite), 3);
}

// An Inf in the last rank's own gradient of 0.bias: found before its bucket is reduced, named.
TEST_F(StopGuardTest, NonFiniteLocalGradientStopsEveryRank) {
  StopGuard g = guard();
  const float inf = std::numeric_limits<float>::infinity();
  model.set(0.5f, last_rank() ? 7 : -1, inf), ddp.backward(nullptr);
  EXPECT_EQ(ddp.non_finite_at(), last_rank() ? 6 : -1) << "the first offset of the bias";
  ::testing::internal::CaptureStderr();
  const StopGuard::Verdict v = g.check(0, 1.0, ddp, /*agree_now=*/false);  // the first step agrees anyway
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(v.non_finite);
  if (last_rank()) {
    EXPECT_NE(said.find("gradient of '0.bias' not finite"), std::string::npos) << said;
  }
}

// Every rank's own gradients finite, their average not (written here as the reducer would leave
// it): the verdict comes at once, whatever the interval.
TEST_F(StopGuardTest, NonFiniteAveragedGradientsStop) {
  StopGuard g = guard();
  model.set(0.5f), ddp.backward(nullptr);
  ASSERT_FALSE(g.check(0, 1.0, ddp, true).non_finite);
  ddp.set_check_finite(false);  // the local check would see the NaN written below
  model.set(0.5f), ddp.backward(nullptr);
  model.arena().grads()[2] = kNaN;
  ::testing::internal::CaptureStderr();
  const StopGuard::Verdict v = g.check(1, 1.0, ddp, /*agree_now=*/false);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(v.non_finite);
  if (env().root()) {
    EXPECT_NE(said.find("NaN/Inf in the gradients averaged over the ranks"), std::string::npos) << said;
  }
}

TEST(ExitCodes, TheContract) {
  EXPECT_EQ(code(Exit::Ok), 0);
  EXPECT_EQ(code(Exit::Error), 1);
  EXPECT_EQ(code(Exit::Usage), 2);
  EXPECT_EQ(code(Exit::NonFinite), 3);
  EXPECT_EQ(code(Exit::Stall), 4);
  EXPECT_EQ(code(Exit::Stopped), 75);
  const std::string help = exit_codes_help();
  for (const char* c : {"0 done", "1 runtime error", "2 bad command line", "3 NaN/Inf", "4 stall", "75 stopped"})
    EXPECT_NE(help.find(c), std::string::npos) << c;
  EXPECT_STREQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_STREQ(signal_name(SIGUSR1), "SIGUSR1");
}

// Last in this file: the stop flag, once set, stays set for the process. SIGUSR1 raised on the
// last rank only; every rank's verdict carries it, and the run ends together with 75.
TEST_F(StopGuardTest, ZSignalSetsTheFlagAndEveryRanksVerdict) {
  install_stop_handlers();
  StopGuard g = guard();
  model.set(0.5f), ddp.backward(nullptr);
  EXPECT_EQ(g.check(0, 1.0, ddp, true).signal, 0);
  ASSERT_EQ(stop_signal(), 0);
  if (last_rank()) {
    ASSERT_EQ(std::raise(SIGUSR1), 0);  // handled: the process goes on
        EXPECT_EQ(stop_signal(), last_rank() ? SIGUSR1 : 0);
  }
  model.set(0.5f), ddp.backward(nullptr);
  const StopGuard::Verdict v = g.check(1, 1.0, ddp, /*agree_now=*/true);
  EXPECT_EQ(v.signal, SIGUSR1);
  EXPECT_FALSE(v.non_finite);
  EXPECT_EQ(finish_together(env(), wd, Exit::Stopped), 75);
  // SIGTERM is a stop request too (the flag holds the latest signal).
  ASSERT_EQ(std::raise(SIGTERM), 0);
  EXPECT_EQ(stop_signal(), SIGTERM);
}

}  // namespace
