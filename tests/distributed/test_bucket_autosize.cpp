// Bucket auto-sizing (distributed/bucket_autosize.h), the pure part: the alpha-beta fit, the
// predicted reducer timeline, the candidate caps and the choice, on synthetic inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>

#include <hddp/distributed/bucket_autosize.h>

namespace {

using namespace hddp;

TEST(FitAlphaBeta, RecoversExactModel) {
  const double alpha = 20e-6, beta = 1.0 / 5e9;  // 20 us, 5 GB/s
  std::vector<int64_t> b = {1024, 4096, 65536, 1 << 20, 8 << 20};
  std::vector<double> t;
  for (int64_t x : b) t.push_back(alpha + beta * double(x));
  const AllreduceModel m = fit_alpha_beta(b, t);
  EXPECT_NEAR(m.alpha, alpha, 1e-9 * alpha);
  EXPECT_NEAR(m.beta, beta, 1e-9 * beta);
  EXPECT_NEAR(m.predict(2 << 20), alpha + beta * double(2 << 20), 1e-12);
}

TEST(FitAlphaBeta, NoisyTimesStayClose) {
  // +-5 % deterministic noise: the relative least-squares fit stays within ~10 % on both.
  const double alpha = 5e-6, beta = 1.0 / 2e9;
  std::vector<int64_t> b;
  std::vector<double> t;
  const double noise[] = {1.05, 0.95, 1.03, 0.97, 1.0, 1.04, 0.96};
  for (int i = 0; i < 7; ++i) {
    b.push_back(int64_t(1024) << (2 * i));
    t.push_back((alpha + beta * double(b.back())) * noise[i]);
  }
  const AllreduceModel m = fit_alpha_beta(b, t);
  EXPECT_NEAR(m.alpha, alpha, 0.1 * alpha);
  EXPECT_NEAR(m.beta, beta, 0.1 * beta);
}

TEST(FitAlphaBeta, PureBandwidthGivesZeroLatency) {
  const double beta = 1e-9;
  std::vector<int64_t> b = {1000, 10000, 100000};
  std::vector<double> t = {beta * 1000, beta * 10000, beta * 100000};
  const AllreduceModel m = fit_alpha_beta(b, t);
  EXPECT_NEAR(m.alpha, 0.0, 1e-15);
  EXPECT_NEAR(m.beta, beta, 1e-6 * beta);
}

TEST(FitAlphaBeta, CoefficientsNeverNegative) {
  // Times falling with size (a noisy measurement): the unconstrained slope is negative;
  // the fit clamps beta to 0 and alpha becomes the (weighted) mean.
  std::vector<int64_t> b = {1000, 2000, 4000};
  std::vector<double> t = {3e-6, 2e-6, 1e-6};
  const AllreduceModel m = fit_alpha_beta(b, t);
  EXPECT_EQ(m.beta, 0.0);
  EXPECT_GT(m.alpha, 1e-6);
  EXPECT_LT(m.alpha, 3e-6);
  // Strongly superlinear: the unconstrained intercept is negative; alpha is clamped to 0.
  std::vector<int64_t> b2 = {1000, 1000000, 2000000};
  std::vector<double> t2 = {1e-9, 1e-3, 4e-3};
  const AllreduceModel m2 = fit_alpha_beta(b2, t2);
  EXPECT_GE(m2.alpha, 0.0);
  EXPECT_GT(m2.beta, 0.0);
}

TEST(FitAlphaBeta, RejectsBadInput) {
  EXPECT_THROW(fit_alpha_beta({1, 2}, {1.0}), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({8, 8, 8}, {1.0, 1.0, 1.0}), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({}, {}), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({8, 16}, {1.0, 0.0}), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({-8, 16}, {1.0, 2.0}), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({8, 16}, {1.0, NAN}), std::invalid_argument);
}

// Four parameters of 100 floats (400 B each); backward finishes one per second.
std::vector<ParamSlice> four_params() {
  return {{"p0", 0, 100}, {"p1", 100, 100}, {"p2", 200, 100}, {"p3", 300, 100}};
}
BackwardProfile one_per_second() { return {{{300, 1}, {200, 2}, {100, 3}, {0, 4}}, 4}; }

TEST(PredictBuckets, HandComputedTimeline) {
  const AllreduceModel m{0.5, 1.0 / 400};  // one parameter: 1.5 s
  // Cap 400 B: one bucket per parameter, launched at 1, 2, 3, 4 s; ends 2.5, 4, 5.5, 7.
  BucketPlan p = predict_buckets(four_params(), 4, one_per_second(), m, 400, 400);
  EXPECT_EQ(p.num_buckets, 4u);
  EXPECT_DOUBLE_EQ(p.comm, 6.0);
  EXPECT_DOUBLE_EQ(p.comm_end, 7.0);
  EXPECT_DOUBLE_EQ(p.exposed, 3.0);
  // One bucket for everything: launched when backward ends, 0.5 + 4 s.
  p = predict_buckets(four_params(), 4, one_per_second(), m, 1600, 1600);
  EXPECT_EQ(p.num_buckets, 1u);
  EXPECT_DOUBLE_EQ(p.comm_end, 8.5);
  EXPECT_DOUBLE_EQ(p.exposed, 4.5);
  // First bucket p3 (1 -> 2.5), then p2+p1 (launched at 3 -> 5.5), then p0 (5.5 -> 7).
  p = predict_buckets(four_params(), 4, one_per_second(), m, 800, 400);
  EXPECT_EQ(p.num_buckets, 3u);
  EXPECT_DOUBLE_EQ(p.comm_end, 7.0);
  EXPECT_DOUBLE_EQ(p.exposed, 3.0);
}

TEST(PredictBuckets, FastCommunicationIsHidden) {
  const AllreduceModel m{0.01, 0.0};
  const BucketPlan p = predict_buckets(four_params(), 4, one_per_second(), m, 400, 400);
  EXPECT_NEAR(p.exposed, 0.01, 1e-12);  // only the last bucket, launched as backward ends
  EXPECT_NEAR(p.comm_end, 4.01, 1e-12);
}

TEST(PredictBuckets, WithoutEventsEverythingStartsAtTheEnd) {
  const AllreduceModel m{1, 0};
  const BucketPlan p = predict_buckets(four_params(), 4, BackwardProfile{{}, 2.0}, m, 400, 400);
  EXPECT_DOUBLE_EQ(p.comm_end, 6.0);
  EXPECT_DOUBLE_EQ(p.exposed, 4.0);
}

TEST(PredictBuckets, RejectsInconsistentProfiles) {
  const AllreduceModel m{1, 0};
  EXPECT_THROW(predict_buckets(four_params(), 4, {{{300, 2}, {200, 1}}, 3}, m, 400, 400), std::invalid_argument);
  EXPECT_THROW(predict_buckets(four_params(), 4, {{{200, 1}, {300, 2}}, 3}, m, 400, 400), std::invalid_argument);
  EXPECT_THROW(predict_buckets(four_params(), 4, {{{300, 1}, {200, 2}}, 1.5}, m, 400, 400), std::invalid_argument);
  EXPECT_THROW(predict_buckets(four_params(), 4, one_per_second(), {-1, 0}, 400, 400), std::invalid_argument);
  EXPECT_THROW(predict_buckets(four_params(), 4, one_per_second(), m, 0, 400), std::invalid_argument);
}

TEST(CandidateCaps, RunsOfConsecutiveParameters) {
  const std::vector<ParamSlice> l = {{"a", 0, 1}, {"b", 1, 2}, {"c", 3, 3}};
  EXPECT_EQ(candidate_caps(l, 4), (std::vector<int64_t>{4, 8, 12, 20, 24}));
  EXPECT_EQ(candidate_caps(l, 4, 3), (std::vector<int64_t>{4, 12, 24}));
  EXPECT_TRUE(candidate_caps({}, 4).empty());
  EXPECT_THROW(candidate_caps(l, 0), std::invalid_argument);
}

// The plans a trial runs: one per distinct bucket assignment (a cap giving the same buckets as
// a smaller one is left out), thinned evenly past max_trials, the extremes kept.
TEST(TrialCaps, OnePairPerDistinctPlan) {
  const std::vector<ParamSlice> l = {{"a", 0, 1}, {"b", 1, 2}, {"c", 3, 3}};
  auto caps_of = [](const std::vector<CapPair>& v) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const CapPair& p : v) out.emplace_back(p.cap_bytes, p.first_cap_bytes);
    return out;
  };
  using V = std::vector<std::pair<int64_t, int64_t>>;
  // First cap = cap: 4 (c | b | a) and 8 give the same buckets; 12 (c | b a), 20 (c b | a), 24 (c b a).
  EXPECT_EQ(caps_of(trial_caps(l, 4, {.tune_first = true})), (V{{4, 4}, {12, 12}, {20, 20}, {24, 24}}));
  EXPECT_EQ(caps_of(trial_caps(l, 4, {.tune_first = true, .max_trials = 3})), (V{{4, 4}, {12, 12}, {24, 24}}));
  // A fixed first cap of 8 bytes: c always alone; then b | a, or b a.
  EXPECT_EQ(caps_of(trial_caps(l, 4, {.tune_first = false, .first_cap_bytes = 8})), (V{{4, 8}, {12, 8}}));
  EXPECT_TRUE(trial_caps({}, 4, {}).empty());
  EXPECT_THROW(trial_caps(l, 4, {.max_trials = 1}), std::invalid_argument);
  EXPECT_THROW(trial_caps({{"a", 0, 1}, {"b", 2, 1}}, 4, {}), std::invalid_argument);  // a gap
}

TEST(ChooseBucketCaps, TiesGoToFewerBuckets) {
  // Caps 400 and 800 both leave 3 s exposed (see HandComputedTimeline); 800 needs 3 buckets.
  const BucketPlan p = choose_bucket_caps(four_params(), 4, one_per_second(), {0.5, 1.0 / 400},
                                          {.tune_first = false, .first_cap_bytes = 400});
  EXPECT_EQ(p.cap_bytes, 800);
  EXPECT_EQ(p.first_cap_bytes, 400);
  EXPECT_EQ(p.num_buckets, 3u);
  EXPECT_DOUBLE_EQ(p.exposed, 3.0);
}

TEST(ChooseBucketCaps, LatencyBoundPicksOneBucket) {
  const AllreduceModel m{10, 1e-9};
  // First cap fixed at one parameter: the rest in one bucket (the largest cap).
  BucketPlan p = choose_bucket_caps(four_params(), 4, one_per_second(), m, {.tune_first = false, .first_cap_bytes = 400});
  EXPECT_EQ(p.num_buckets, 2u);
  EXPECT_EQ(p.cap_bytes, 1600);
  // Tuning the first cap too: a single bucket.
  p = choose_bucket_caps(four_params(), 4, one_per_second(), m, {.tune_first = true});
  EXPECT_EQ(p.num_buckets, 1u);
  EXPECT_EQ(p.first_cap_bytes, 1600);
  EXPECT_NEAR(p.exposed, 10.0, 1e-5);
}

TEST(ChooseBucketCaps, BandwidthBoundKeepsTheLastLayerAlone) {
  // No latency, long backward (10 s per layer), 1 s per parameter: only the bucket holding
  // p0 (ready at the end) is exposed, so p0 must be alone: 1 s. Without latency, merging the
  // earlier parameters costs nothing (they finish long before the end), so the fewest
  // buckets win the tie.
  const BackwardProfile slow{{{300, 10}, {200, 20}, {100, 30}, {0, 40}}, 40};
  BucketPlan p = choose_bucket_caps(four_params(), 4, slow, {0, 1.0 / 400}, {.tune_first = true});
  EXPECT_DOUBLE_EQ(p.exposed, 1.0);
  EXPECT_EQ(p.num_buckets, 2u);
  EXPECT_EQ(p.first_cap_bytes, 1200);  // p3, p2, p1
  // First bucket fixed at one parameter: p2 + p1 together (cap 800), p0 alone.
  p = choose_bucket_caps(four_params(), 4, slow, {0, 1.0 / 400}, {.tune_first = false, .first_cap_bytes = 400});
  EXPECT_DOUBLE_EQ(p.exposed, 1.0);
  EXPECT_EQ(p.num_buckets, 3u);
  EXPECT_EQ(p.cap_bytes, 800);
  // One bucket for everything would expose all 4 s.
  EXPECT_DOUBLE_EQ(predict_buckets(four_params(), 4, slow, {0, 1.0 / 400}, 1600, 1600).exposed, 4.0);
}

TEST(ChooseBucketCaps, NoCandidateBeatsTheChoice) {
  // Random layouts and profiles: the choice is within the tie tolerance of every cap pair
  // on a power-of-two grid.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<ParamSlice> l;
    int64_t off = 0;
    const int n = 2 + int(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const int64_t s = 1 + int64_t(rng() % 200000);
      ParamSlice p;
      p.name = std::to_string(i);
      p.offset = off, p.size = s;
      l.push_back(p);
      off += s;
    }
    BackwardProfile prof;
    double t = 0;
    for (int i = n - 1; i >= 0; --i) {
      t += 1e-4 * double(1 + rng() % 100);
      prof.events.push_back({l[i].offset, t});
      if (rng() % 3 == 0) prof.events.push_back({l[i].offset, t});  // an activation layer
    }
    prof.total = t + 1e-5;
    const AllreduceModel m{1e-6 * double(1 + rng() % 100), 1e-10 * double(1 + rng() % 100)};
    AutosizeOptions opt;
    opt.tune_first = trial % 2 == 0;
    const BucketPlan best = choose_bucket_caps(l, 4, prof, m, opt);
    EXPECT_EQ(best.exposed, predict_buckets(l, 4, prof, m, best.cap_bytes, best.first_cap_bytes).exposed);
    const double tol = std::max(opt.tie_abs, opt.tie_rel * best.exposed);
    for (int64_t c = 4; c <= 8 * off; c *= 2) {
      const int64_t f = opt.tune_first ? c : opt.first_cap_bytes;
      EXPECT_LE(best.exposed, predict_buckets(l, 4, prof, m, c, f).exposed + tol) << "trial " << trial << " cap " << c;
    }
  }
}

TEST(FormatBytes, Units) {
  EXPECT_EQ(format_bytes(4 << 20), "4 MiB");
  EXPECT_EQ(format_bytes(3 << 19), "1.50 MiB");
  EXPECT_EQ(format_bytes(96 << 10), "96 KiB");
  EXPECT_EQ(format_bytes(244), "244 B");
}

}  // namespace
