// The at-scale replay of a training step (bench/at_scale/step_replay.h) against timelines
// computed by hand (milliseconds in the comments), and its two input files.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "bench/at_scale/step_replay.h"
#include <hddp/kernels/check.h>

namespace {

using namespace hddp;

constexpr double ms = 1e-3;

// Two layers of 1000 floats (4000 B) each; backward of layer 0 `bwd0` ms, of layer 1 1 ms.
ModelProfile two_layers(double bwd0_ms) {
  ModelProfile m;
  m.layers = {{"a", {1000}, 0.0, bwd0_ms * ms}, {"b", {1000}, 0.0, 1 * ms}};
  return m;
}

// At 2 ranks t(1000 B) = 1 ms, t(10000 B) = 2 ms, a straight line: alpha = 8/9 ms,
// t(4000 B) = 4/3 ms, t(8000 B) = 16/9 ms; reductions not charged.
AllreduceTable table() {
  return parse_allreduce_table(
      "# a comment\n"
      "op,ranks,bytes,seconds,reduction_charged\n"
      "allreduce,2,1000,1e-3,0\nallreduce,2,10000,2e-3,0\n"
      "iallreduce,2,1000,1e-3,0\niallreduce,2,10000,2e-3,0\n");
}

// Reductions at 4 MB/s: 2000 B reduced = 0.5 ms. Poll every 1 ms.
ReplayOptions options(int64_t cap = 4000) {
  ReplayOptions o;
  o.ranks = 2, o.cap_bytes = o.first_cap_bytes = cap;
  o.poll_interval = 1 * ms, o.reduce_bandwidth = 4e6;
  return o;
}

TEST(StepReplay, RabenseifnerRounds) {
  const std::vector<Round> r = rabenseifner_rounds(800, 8);
  ASSERT_EQ(r.size(), 6u);
  const int64_t bytes[] = {400, 200, 100, 100, 200, 400}, reduced[] = {400, 200, 100, 0, 0, 0};
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(r[k].bytes, bytes[k]) << k;
    EXPECT_EQ(r[k].reduced, reduced[k]) << k;
  }
  EXPECT_TRUE(rabenseifner_rounds(800, 1).empty());
  EXPECT_EQ(rabenseifner_rounds(800, 3).size(), 4u);  // 2 ceil(log2 3)
  EXPECT_DOUBLE_EQ(rabenseifner_reduced(800, 8), 700.0);  // bytes (P - 1) / P
  EXPECT_DOUBLE_EQ(rabenseifner_reduced(800, 1), 0.0);
}

TEST(StepReplay, OneRankIsCompute) {
  ModelProfile m = two_layers(10);
  m.layers[0].forward = 2 * ms, m.other = 0.5 * ms;
  ReplayOptions o = options();
  o.ranks = 1;  // the table has no 1-rank rows: none are needed
  for (const StepTimeline& s : {replay_blocking(m, table(), o), replay_overlapped(m, table(), o)}) {
    EXPECT_DOUBLE_EQ(s.step, 13.5 * ms);
    EXPECT_DOUBLE_EQ(s.exposed, 0.0);
    EXPECT_DOUBLE_EQ(s.efficiency(), 1.0);
    EXPECT_EQ(s.num_buckets, 2u);
  }
}

TEST(StepReplay, OneBucketOverlapped) {
  // Launched after backward (3 ms: forward 1, backward 2); round 0 arrives at 3 + 2/3, its
  // reduction 0.5 -> 4 1/6; round 1 arrives at 4 5/6 = done; other 0.5 -> 5 1/3.
  ModelProfile m;
  m.layers = {{"x", {1000}, 1 * ms, 2 * ms}};
  m.other = 0.5 * ms;
  const StepTimeline s = replay_overlapped(m, table(), options(1 << 20));
  EXPECT_EQ(s.num_buckets, 1u);
  EXPECT_NEAR(s.step, (5 + 1.0 / 3) * ms, 1e-12);
  EXPECT_NEAR(s.backward_stretched, 2 * ms, 1e-12);
  EXPECT_NEAR(s.comm_span, (1 + 5.0 / 6) * ms, 1e-12);
  EXPECT_NEAR(s.exposed, (1 + 5.0 / 6) * ms, 1e-12);
  // Blocking: 4/3 ms of allreduce + 0.5 ms of reduction after 3.5 ms of compute.
  const StepTimeline b = replay_blocking(m, table(), options(1 << 20));
  EXPECT_NEAR(b.step, (3.5 + 4.0 / 3 + 0.5) * ms, 1e-12);
  EXPECT_NEAR(b.exposed, (4.0 / 3 + 0.5) * ms, 1e-12);
}

TEST(StepReplay, TwoBucketsComputeLongerThanCommunication) {
  // Bucket 0 (layer b) launched at 1; polls at 2 (round 0 arrived at 1 2/3: reduce 0.5 ->
  // 2.5, round 1 arrives at 3 1/6) and 3.5 (done). Layer a ends at 1 + 10 + 0.5 = 11.5;
  // bucket 1 launched then: round 0 at 12 1/6, reduce -> 12 2/3, done at 13 1/3.
  const StepTimeline s = replay_overlapped(two_layers(10), table(), options());
  EXPECT_EQ(s.num_buckets, 2u);
  EXPECT_NEAR(s.backward_stretched, 11.5 * ms, 1e-12);
  EXPECT_NEAR(s.step, (13 + 1.0 / 3) * ms, 1e-12);
  EXPECT_NEAR(s.exposed, (2 + 1.0 / 3) * ms, 1e-12);
  EXPECT_NEAR(s.comm_span, (12 + 1.0 / 3) * ms, 1e-12);
  EXPECT_NEAR(s.efficiency(), 11.0 / (13 + 1.0 / 3), 1e-12);
}

TEST(StepReplay, SharedMemoryTransfersRunOnTheCaller) {
  // As TwoBucketsComputeLongerThanCommunication, each round's transfer (2/3 ms) now inside the
  // call: bucket 0 launched at 1, the hook runs round 0 (2/3 + 0.5 reduce) -> 2 1/6; the poll
  // at 3 1/6 runs round 1 -> 3 5/6; layer a ends at 12 5/6; bucket 1 in its hook -> 14, in
  // finish() -> 14 2/3. Exposed 3 2/3 ms instead of 2 1/3.
  ReplayOptions o = options();
  o.transfers_on_caller = true;
  const StepTimeline s = replay_overlapped(two_layers(10), table(), o);
  EXPECT_NEAR(s.step, (14 + 2.0 / 3) * ms, 1e-12);
  EXPECT_NEAR(s.exposed, (3 + 2.0 / 3) * ms, 1e-12);
  // Blocking is the same either way: the whole allreduce is on the caller already.
  const StepTimeline b = replay_blocking(two_layers(10), table(), o), b0 = replay_blocking(two_layers(10), table(), options());
  EXPECT_DOUBLE_EQ(b.step, b0.step);
}

TEST(StepReplay, TwoBucketsComputeShorterThanCommunication) {
  // Bucket 0 launched at 1, layer a (0.5 ms) ends at 1.5 before any poll: backward is not
  // stretched. finish(): round 0 at 1 2/3 + 0.5, round 1 at 2 5/6 (done); bucket 1: round 0
  // at 3.5 + 0.5 = 4, round 1 at 4 2/3.
  const StepTimeline s = replay_overlapped(two_layers(0.5), table(), options());
  EXPECT_NEAR(s.backward_stretched, 1.5 * ms, 1e-12);
  EXPECT_NEAR(s.step, (4 + 2.0 / 3) * ms, 1e-12);
  EXPECT_NEAR(s.exposed, (3 + 1.0 / 6) * ms, 1e-12);
  // Blocking: two buckets of 4/3 + 0.5 ms after 1.5 ms of backward.
  const StepTimeline b = replay_blocking(two_layers(0.5), table(), options());
  EXPECT_NEAR(b.step, (1.5 + 2 * (4.0 / 3 + 0.5)) * ms, 1e-12);
}

TEST(StepReplay, BestCap) {
  // Short backward: one 8000 B bucket launched at 1.5 (rounds of 8/9 ms, 1 ms of reduction)
  // ends at 4 5/18 < 4 2/3 with two buckets. Long backward: two buckets win (13 1/3 < 13 7/9).
  // The first cap (1 MiB) is lowered to each candidate cap.
  ReplayOptions o = options();
  o.first_cap_bytes = 1 << 20;
  const BestCap short_bwd = best_overlapped_cap(two_layers(0.5), table(), o);
  EXPECT_EQ(short_bwd.cap_bytes, 8000);
  EXPECT_NEAR(short_bwd.timeline.step, (4 + 5.0 / 18) * ms, 1e-12);
  const BestCap long_bwd = best_overlapped_cap(two_layers(10), table(), o);
  EXPECT_EQ(long_bwd.cap_bytes, 4000);
  EXPECT_EQ(long_bwd.timeline.num_buckets, 2u);
}

TEST(StepReplay, ChargedTableIsNotChargedTwice) {
  // A measured table (reduction_charged = 1) already holds the reduction: blocking adds none
  // at 2 ranks, and the overlapped rounds' network time is the table's minus the reduction.
  const AllreduceTable t = parse_allreduce_table(
      "op,ranks,bytes,seconds,reduction_charged\nallreduce,2,1000,1e-3,1\nallreduce,2,10000,2e-3,1\n"
      "iallreduce,2,1000,1e-3,1\niallreduce,2,10000,2e-3,1\n");
  ModelProfile m;
  m.layers = {{"x", {1000}, 1 * ms, 2 * ms}};
  EXPECT_NEAR(replay_blocking(m, t, options(1 << 20)).step, (3 + 4.0 / 3) * ms, 1e-12);
  // Network (4/3 - 0.5) split as before: alpha 8/9 capped to 5/6 -> rounds of 5/12;
  // 3 + 5/12 + 0.5 + 5/12 = 4 1/3.
  EXPECT_NEAR(replay_overlapped(m, t, options(1 << 20)).step, (4 + 1.0 / 3) * ms, 1e-12);
}

TEST(AllreduceTable, Interpolates) {
  const AllreduceTable t = table();
  EXPECT_DOUBLE_EQ(t.seconds("allreduce", 2, 10), 1e-3);      // below the smallest size
  EXPECT_NEAR(t.seconds("allreduce", 2, 4000), 4.0 / 3 * ms, 1e-15);
  EXPECT_NEAR(t.seconds("allreduce", 2, 19000), 3e-3, 1e-15);  // the last slope beyond
  EXPECT_EQ(t.ranks("allreduce"), std::vector<int>{2});
  EXPECT_FALSE(t.reduction_charged("allreduce", 2));
  try {
    t.seconds("allreduce", 64, 4000);
    FAIL() << "no rows at 64 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no allreduce rows at 64 ranks (it has: 2)"), std::string::npos) << e.what();
  }
}

// Every case's text, parsed by `parse` under the name `path`, fails with a message holding
// the expected part.
template <class Parse>
void expect_errors(const std::vector<std::pair<std::string, std::string>>& cases, Parse parse) {
  for (const auto& [text, want] : cases) {
    std::string got = "(no error)";
    try {
      parse(text);
    } catch (const Error& e) {
      got = e.what();
    }
    EXPECT_NE(got.find(want), std::string::npos) << "input:\n" << text << "\nmessage: " << got;
  }
}

TEST(AllreduceTable, BadFilesNameTheLine) {
  const std::string h = "op,ranks,bytes,seconds,reduction_charged\n";
  expect_errors({
      {"", "empty table"},
      {"ops,ranks\n", "t.csv:1: header 'ops,ranks'"},
      {h + "allreduce,2,8,1e-6\n", "t.csv:2: expected 5 fields, found 4"},
      {h + "reduce,2,8,1e-6,0\n", "t.csv:2: op 'reduce'"},
      {h + "allreduce,2,8,1e-6,0\n\nallreduce,two,8,1e-6,0\n", "t.csv:4: ranks 'two'"},
      {h + "allreduce,2,-8,1e-6,0\n", "t.csv:2: bytes '-8'"},
      {h + "allreduce,2,8,nan,0\n", "t.csv:2: seconds 'nan'"},
      {h + "allreduce,2,8,0,0\n", "t.csv:2: seconds must be > 0"},
      {h + "allreduce,2,8,1e-6,yes\n", "t.csv:2: reduction_charged 'yes'"},
      {h + "allreduce,2,8,1e-6,0\nallreduce,2,8,2e-6,0\n", "t.csv:3: allreduce at 2 ranks, 8 bytes appears twice"},
      {h, "no rows"},
  }, [](const std::string& text) { parse_allreduce_table(text, "t.csv"); });
}

TEST(ModelProfile, ParsesConvertsAndRoundTrips) {
  ModelProfile m = parse_model_profile(
      "layer,params,forward_flop,backward_flop\nfc1,1048576+1024,4e9,8e9\nrelu,0,1e6,1e6\nfc2,1024,8e6,1.6e7\n", "p.csv");
  EXPECT_TRUE(m.flop);
  EXPECT_EQ(m.num_params(), 1048576 + 1024 + 1024);
  const std::vector<ParamSlice> l = profile_layout(m);
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[1].name, "fc1.1");
  EXPECT_EQ(l[2].offset, 1048576 + 1024);
  EXPECT_THROW(replay_blocking(m, table(), options()), std::invalid_argument);  // flop, not seconds
  ModelProfile s = m;
  profile_to_seconds(s, 1e12);
  EXPECT_DOUBLE_EQ(s.layers[0].backward, 8e-3);
  profile_scale_to(m, 0.1);
  EXPECT_NEAR(m.compute(), 0.1, 1e-15);
  const ModelProfile back = parse_model_profile(model_profile_csv(m));
  EXPECT_EQ(back.num_params(), m.num_params());
  EXPECT_NEAR(back.compute(), 0.1, 1e-9);
}

TEST(ModelProfile, BadFilesNameTheLine) {
  const std::string h = "layer,params,forward_s,backward_s\n";
  expect_errors({
      {"", "empty profile"},
      {"layer,params\n", "p.csv:1: header 'layer,params'"},
      {h + "fc,10,1e-3\n", "p.csv:2: expected 4 fields, found 3"},
      {h + ",10,1e-3,1e-3\n", "p.csv:2: empty layer name"},
      {h + "fc,10,1e-3,1e-3\nfc,10,1e-3,1e-3\n", "p.csv:3: layer 'fc' appears twice"},
      {h + "fc,10+x,1e-3,1e-3\n", "p.csv:2: parameter count 'x'"},
      {h + "fc,,1e-3,1e-3\n", "p.csv:2: empty parameter count"},
      {h + "fc,10,-1,1e-3\n", "p.csv:2: forward time '-1'"},
      {h + "fc,10,1e-3,inf\n", "p.csv:2: backward time 'inf'"},
      {h + "relu,0,1e-3,1e-3\n", "no parameters"},
  }, [](const std::string& text) { parse_model_profile(text, "p.csv"); });
}

}  // namespace
