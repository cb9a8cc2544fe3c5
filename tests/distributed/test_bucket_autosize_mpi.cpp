// Bucket auto-sizing, the MPI part (distributed/bucket_autosize.h): the start-up measurement runs
// identically on every rank and every rank ends with rank 0's caps.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/rng.h>
#include <hddp/distributed/bucket_autosize.h>
#include <hddp/distributed/ddp.h>
#include "tests/common/mse.h"

namespace {

using namespace hddp;

// True on every rank when v is the same on every rank.
bool same_everywhere(int64_t v) {
  int64_t lo = 0, hi = 0;
  MPI_Allreduce(&v, &lo, 1, MPI_INT64_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&v, &hi, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return lo == hi;
}

TEST(AllreduceSamples, SizesAndTimes) {
  const AllreduceSamples s = measure_allreduce(MPI_COMM_WORLD, 300000, 3);
  ASSERT_GE(s.bytes.size(), 2u);
  EXPECT_EQ(s.bytes.front(), 1024);
  EXPECT_EQ(s.bytes.back(), 300000);
  EXPECT_TRUE(std::is_sorted(s.bytes.begin(), s.bytes.end()));
  ASSERT_EQ(s.seconds.size(), s.bytes.size());
  for (size_t i = 0; i < s.seconds.size(); ++i) {
    EXPECT_GT(s.seconds[i], 0.0);
    EXPECT_LT(s.seconds[i], 10.0);
    // The slowest rank's median: the same number on every rank.
    int64_t bits = 0;
    static_assert(sizeof bits == sizeof s.seconds[i]);
    std::memcpy(&bits, &s.seconds[i], sizeof bits);
    EXPECT_TRUE(same_everywhere(bits)) << "size " << s.bytes[i];
  }
  const AllreduceSamples tiny = measure_allreduce(MPI_COMM_WORLD, 244, 1);
  EXPECT_EQ(tiny.bytes.front(), 12);
  EXPECT_EQ(tiny.bytes.back(), 244);
}

TEST(Autosize, SameCapsOnEveryRank) {
  Rng rng(3);
  Sequential<float> model({Linear(1, 256), Tanh(), Linear(256, 256), Tanh(), Linear(256, 1)}, 64, rng);
  std::vector<float> x(64), y(64);
  for (auto& v : x) v = rng.uniform(-1.0f, 1.0f);
  for (auto& v : y) v = rng.uniform(-0.9f, 0.9f);
  for (bool tune_first : {false, true}) {
    AutosizeOptions opt;
    opt.tune_first = tune_first;
    const AutosizeResult r = autosize_buckets(MPI_COMM_WORLD, model, x.data(), 64, y.data(), opt);
    EXPECT_TRUE(same_everywhere(r.plan.cap_bytes));
    EXPECT_TRUE(same_everywhere(r.plan.first_cap_bytes));
    EXPECT_GT(r.plan.cap_bytes, 0);
    EXPECT_LE(r.plan.cap_bytes, model.num_params() * 4);
    if (!tune_first) {
      EXPECT_EQ(r.plan.first_cap_bytes, int64_t(1) << 20);
    }
    EXPECT_GE(r.model.alpha, 0.0);
    EXPECT_GE(r.model.beta, 0.0);
    EXPECT_EQ(r.samples.bytes.back(), model.num_params() * 4);
    // The profile: one event per layer, in backward order, at the layers' first offsets.
    ASSERT_EQ(r.profile.events.size(), model.num_layers());
    for (size_t k = 0; k < r.profile.events.size(); ++k) {
      const size_t layer = model.num_layers() - 1 - k;
      EXPECT_EQ(r.profile.events[k].ready_from,
                !model.layer(layer).parameters().empty() ? model.layer_param_range(layer).first
                                                             : r.profile.events[k - 1].ready_from);
      EXPECT_GE(r.profile.events[k].t, k ? r.profile.events[k - 1].t : 0.0);
    }
    EXPECT_GE(r.profile.total, r.profile.events.back().t);
    // The trials: every distinct plan, each with the same time on every rank; the choice is
    // the fastest, or one with fewer buckets within the tie tolerance of it.
    const std::vector<CapPair> tried = trial_caps(param_layout(model.param_views()), 4, opt);
    ASSERT_EQ(r.trials.size(), tried.size());
    // A fixed 1 MiB first cap holds this model whole: one plan; with it tuned, several.
    ASSERT_GE(r.trials.size(), tune_first ? 3u : 1u);
    double fastest = 1e30;
    const PlanTrial* chosen = nullptr;
    for (size_t k = 0; k < r.trials.size(); ++k) {
      const PlanTrial& t = r.trials[k];
      EXPECT_EQ(t.cap_bytes, tried[k].cap_bytes);
      EXPECT_EQ(t.first_cap_bytes, tried[k].first_cap_bytes);
      EXPECT_GT(t.step_s, 0.0);
      int64_t bits = 0;
      std::memcpy(&bits, &t.step_s, sizeof bits);
      EXPECT_TRUE(same_everywhere(bits)) << "trial " << k;
      fastest = std::min(fastest, t.step_s);
      if (t.cap_bytes == r.plan.cap_bytes && t.first_cap_bytes == r.plan.first_cap_bytes) chosen = &t;
    }
    ASSERT_NE(chosen, nullptr) << "the plan chosen was not tried";
    EXPECT_EQ(chosen->num_buckets, r.plan.num_buckets);
    EXPECT_EQ(chosen->step_s, r.step_s);
    const double tie = fastest + std::max(opt.tie_abs, opt.trial_tie_rel * fastest);  // pick_least's
    EXPECT_LE(r.step_s, tie);
    for (const PlanTrial& t : r.trials)  // nothing within the tie has fewer buckets
      if (t.step_s <= tie) {
        EXPECT_GE(t.num_buckets, r.plan.num_buckets);
      }
    // The hook is gone and the gradients are zero: a DistributedModel can be built next.
    for (int64_t i = 0; i < model.num_params(); ++i) ASSERT_EQ(model.grads()[i], 0.0f) << i;
    ReducerOptions ro;
    ro.bucket_cap_bytes = r.plan.cap_bytes, ro.first_bucket_cap_bytes = r.plan.first_cap_bytes;
    DistributedModel ddp(MPI_COMM_WORLD, model, ro);
    EXPECT_EQ(ddp.reducer().buckets().size(), r.plan.num_buckets);
    model.zero_grad();
    model.forward(x, 64);
    hddp::testing::backward_mse(ddp, model, y.data());
    EXPECT_EQ(ddp.reducer().stats().steps, 1);
  }
}

}  // namespace
