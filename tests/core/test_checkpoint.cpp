// Training checkpoints (core/checkpoint.h), apart from the fuzzer (tests/faults/test_fuzz.cpp):
// a save/restore round trip of model, optimizer and RNG continues training bitwise, from the
// file and from its bytes (the resume path: rank 0 reads, every rank parses the same bytes);
// a mismatched model is refused and changes nothing; identity_diff names what differs.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include <hddp/core/checkpoint.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>
#include "tests/common/testing.h"
#include "tests/common/mse.h"

using namespace hddp;

namespace {

class Checkpoints : public hddp::testing_util::TempDirTest {};

// A model, its optimizer and its data stream: one training run.
struct Training {
  Rng init{7};
  Sequential<float> model{{Linear(1, 8), Tanh(), Linear(8, 1, false), Tanh()}, 16, init};
  Adam<float> adam{model.num_params(), {.lr = 0.01}};
  Rng data{7, 1};
  std::vector<float> losses;
  // noinline: GCC 12 reports a false -Wdangling-pointer when this is inlined into a test body.
  __attribute__((noinline)) void train(int steps) {
    std::vector<float> x(16), y(16);
    for (int s = 0; s < steps; ++s) {
      for (int i = 0; i < 16; ++i) x[i] = data.uniform(-1.0f, 1.0f), y[i] = 0.5f * x[i] * x[i];
      model.zero_grad();
      model.forward(x, 16);
      losses.push_back(hddp::testing::mse_of(model, y.data()));
      hddp::testing::backward_mse(model, y.data());
      adam.step(model.params(), model.grads());
    }
  }
  TrainState state(int64_t step) const {
    TrainState st;
    st.step = step, st.world_size = 1, st.rng = {data.state()};
    st.identity = {{"layers", "tutorial"}, {"lr", "0.01"}};
    st.records = {{"metrics", std::string("epoch,loss\n1,0.5\n\0binary\xff", 25)}, {"empty", ""},
                  {"losses", std::string(reinterpret_cast<const char*>(losses.data()), losses.size() * sizeof(float))}};
    return st;
  }
  std::vector<float> params() const {
    return std::vector<float>(model.params(), model.params() + model.num_params());
  }
};

// Restores `c` into a fresh run with different initial parameters and state.
__attribute__((noinline)) void restore_into(Training& fresh, const Checkpoint& c, const std::string& p) {
  restore_checkpoint(c, p, fresh.model.arena(), fresh.adam);
  fresh.data.set_state(c.state.rng[0]);
  const std::string& l = c.state.records.at("losses");
  fresh.losses.assign(reinterpret_cast<const float*>(l.data()), reinterpret_cast<const float*>(l.data() + l.size()));
}

TEST_F(Checkpoints, RoundTripContinuesBitwise) {
  Training whole;
  whole.train(40);  // the run that never stops

  Training first;
  first.train(25);
  const std::string p = path("run.ckpt");
  save_checkpoint(p, first.model.arena(), first.adam, first.state(25));

  for (bool from_bytes : {false, true}) {
    SCOPED_TRACE(from_bytes ? "parse_checkpoint(bytes)" : "read_checkpoint(path)");
    const Checkpoint c = from_bytes ? parse_checkpoint(read_file(p), p) : read_checkpoint(p);
    EXPECT_EQ(c.state.step, 25);
    EXPECT_EQ(c.state.world_size, 1);
    ASSERT_EQ(c.state.rng.size(), 1u);
    EXPECT_EQ(c.state.rng[0], first.data.state());
    EXPECT_EQ(identity_diff(c.state, 1, first.state(25).identity), "");
    EXPECT_EQ(c.state.records, first.state(25).records);  // the driver's records, byte for byte

    Training resumed;
    resumed.train(3);        // different parameters, optimizer moments and step count
    restore_into(resumed, c, p);
    EXPECT_EQ(resumed.params(), first.params());
    EXPECT_EQ(resumed.adam.steps(), 25);
    resumed.train(15);
    EXPECT_EQ(resumed.params(), whole.params()) << "a restored run must continue bitwise";
    EXPECT_EQ(resumed.losses, whole.losses);
  }
}

TEST_F(Checkpoints, NoRngStatesIsAllowed) {
  Training a;
  a.train(4);
  TrainState st = a.state(4);
  st.rng.clear();  // a program with no per-rank stream
  const std::string p = path("norng.ckpt");
  save_checkpoint(p, a.model.arena(), a.adam, st);
  const Checkpoint c = read_checkpoint(p);
  EXPECT_TRUE(c.state.rng.empty());
  EXPECT_EQ(c.state.step, 4);
  st.rng = {a.data.state(), a.data.state()};  // two states for one rank
  EXPECT_THROW(save_checkpoint(p, a.model.arena(), a.adam, st), std::invalid_argument);
}

TEST_F(Checkpoints, AnotherModelIsRefusedAndNothingChanges) {
  Training a;
  a.train(5);
  const std::string p = path("a.ckpt");
  save_checkpoint(p, a.model.arena(), a.adam, a.state(5));
  Rng init{1};
  Sequential<float> wider({Linear(1, 9), Tanh(), Linear(9, 1, false), Tanh()}, 16, init);
  Adam<float> adam(wider.num_params());
  const std::vector<float> before(wider.params(), wider.params() + wider.num_params());
  const Checkpoint c = read_checkpoint(p);
  EXPECT_THROW(restore_checkpoint(c, p, wider.arena(), adam), Error);
  EXPECT_EQ(std::vector<float>(wider.params(), wider.params() + wider.num_params()), before);
  EXPECT_EQ(adam.steps(), 0);
}

TEST_F(Checkpoints, IdentityDiffNamesWhatDiffers) {
  Training a;
  const TrainState st = a.state(0);
  EXPECT_EQ(identity_diff(st, 1, st.identity), "");
  const std::string d = identity_diff(st, 3, {{"layers", "tutorial"}, {"lr", "0.02"}});
  EXPECT_NE(d.find("world size (MPI ranks): 1 in the checkpoint, 3 now"), std::string::npos) << d;
  EXPECT_NE(d.find("lr: '0.01' in the checkpoint, '0.02' now"), std::string::npos) << d;
}

TEST_F(Checkpoints, BytesThatAreNotACheckpointThrowNamingTheFile) {
  try {
    parse_checkpoint("not a checkpoint", "x.ckpt");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x.ckpt' is not an hddp tensor file"), std::string::npos) << e.what();
  }
}

}  // namespace
