// The run kit's own rules (train/training_run.h): calls out of order are hddp::Error, not a
// crash; the epoch's training loss is the mean over its samples on every rank (each step's
// loss weighted by its rows); the metrics table and the loss sums of an epoch under way come
// back from a checkpoint; the optimizer's settings and the schedule are part of the run's
// identity; messages use the program's own option names only where it gives them. Runs as a
// plain process and on 2 ranks.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/schedule.h>
#include <hddp/train/training_run.h>
#include "tests/common/testing.h"
#include "tests/train/train_testing.h"

using namespace hddp;
namespace fs = std::filesystem;

namespace {

using hddp::testing::env;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A scratch folder in the build tree (the test's working directory) of rank 0's name on every
// rank, removed at the end.
struct Dir {
  std::string path;
  Dir() {
    int pid = getpid();
    MPI_Bcast(&pid, 1, MPI_INT, 0, env().comm());  // rank 0's
    path = fs::current_path() / ("training_run_tmp_" + std::to_string(pid));
    if (env().root()) fs::create_directories(path);
    MPI_Barrier(env().comm());
  }
  ~Dir() {
    MPI_Barrier(env().comm());
    if (env().root()) fs::remove_all(path);
  }
};

struct Net {
  Rng init{5};
  Sequential<float> model{{Linear(2, 3)}, 8, init};
  Adam<float> adam{model.num_params(), {.lr = 1e-2}};
};

TEST(TrainingRun, CallsOutOfOrderAreErrorsNotCrashes) {
  Net n;
  TrainingRun run(env(), n.model, n.adam, {.program = "t", .epochs = 1});
  EXPECT_THROW(run.ddp(), Error);
  try {
    run.ddp();
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "call run.begin() first")) << e.what();
  }
  EXPECT_THROW(run.end_step(0, 1.0, 8), Error);
  EXPECT_THROW(run.metrics(), Error);  // no columns named
}

// Two steps per epoch of 3 and 1 rows on rank r, losses (r + 1) and 2 (r + 1): the epoch's loss
// is the row-weighted mean over every rank, the same everywhere.
TEST(TrainingRun, EpochLossIsTheMeanOverItsSamples) {
  Net n;
  TrainingRun run(env(), n.model, n.adam, {.program = "t", .epochs = 2, .steps_per_epoch = 2, .metrics = {"epoch", "loss"}});
  ASSERT_EQ(run.begin(), "");
  std::vector<EpochEnd> seen;
  const auto on_end = [&](const EpochEnd& e) { seen.push_back(e), run.metrics().add({double(e.epoch + 1), e.train_loss}); };
  const double r1 = env().rank() + 1;
  for (int64_t step = 0; step < run.total_steps(); ++step) {
    n.model.zero_grad();
    ASSERT_FALSE(run.end_step(step, step % 2 == 0 ? r1 : 2 * r1, step % 2 == 0 ? 3 : 1, on_end));
  }
  ASSERT_EQ(seen.size(), 2u);
  double num = 0, rows = 0;
  for (int r = 0; r < env().size(); ++r) num += 3 * (r + 1) + 2 * (r + 1), rows += 4;
  for (const EpochEnd& e : seen) {
    EXPECT_DOUBLE_EQ(e.train_loss, num / rows);
    EXPECT_EQ(e.samples, 4 * env().size());
  }
  EXPECT_EQ(seen[1].epoch, 1);
  EXPECT_EQ(run.metrics().size(), 2u);
}

TEST(TrainingRun, AnEpochWithoutItsMetricsRowIsAnError) {
  Net n;
  TrainingRun run(env(), n.model, n.adam, {.program = "t", .epochs = 1, .metrics = {"epoch"}});
  ASSERT_EQ(run.begin(), "");
  n.model.zero_grad();
  EXPECT_THROW(run.end_step(0, 1.0, 8, [](const EpochEnd&) {}), Error);
}

// A run cut after 3 of its 4 steps (its checkpoint: after epoch 1), resumed, ends with the
// metrics of an uninterrupted one. (A checkpoint inside an epoch, where the loss sums matter,
// comes from a signal: the drivers' signal tests resume those bitwise.)
TEST(TrainingRun, MetricsAndLossSumsComeBackFromTheCheckpoint) {
  Dir d;
  const auto losses = [](int64_t step) { return 0.5 + double(step) + env().rank(); };
  const auto train = [&](const std::string& ck, int64_t upto) {
    Net n;
    TrainingRun run(env(), n.model, n.adam,
                    {.program = "t", .epochs = 2, .steps_per_epoch = 2, .checkpoint = ck, .resume = true,
                     .checkpoint_every = 1, .metrics = {"epoch", "loss"}});
    EXPECT_EQ(run.begin(), "");
    const auto on_end = [&](const EpochEnd& e) { run.metrics().add({double(e.epoch + 1), e.train_loss}); };
    for (int64_t step = run.first_step(); step < std::min(upto, run.total_steps()); ++step) {
      n.model.zero_grad();
      EXPECT_FALSE(run.end_step(step, losses(step), 2 + step, on_end));
    }
    return run.metrics().rows();
  };
  const std::vector<std::vector<double>> whole = train("", 4);
  ASSERT_EQ(whole.size(), 2u);
  train(d.path + "/ck", 3);  // the checkpoint after epoch 1 (step 2); step 3's sums are lost with it
  EXPECT_EQ(train(d.path + "/ck", 4), whole);
}

TEST(TrainingRun, IdentityCoversTheOptimizerAndTheSchedule) {
  Dir d;
  const std::string ck = d.path + "/ck";
  {
    Net n;
    const LrSchedule cos = LrSchedule::cosine(1e-2, 4);
    TrainingRun run(env(), n.model, n.adam, {.program = "t", .epochs = 1, .steps_per_epoch = 2, .checkpoint = ck, .schedule = &cos});
    ASSERT_EQ(run.begin(), "");
    for (int64_t step = 0; step < 2; ++step) {
      n.model.zero_grad();
      ASSERT_FALSE(run.end_step(step, 1.0, 8));
    }
  }
  {  // the same cosine over more epochs: another run
    Net n;
    const LrSchedule cos = LrSchedule::cosine(1e-2, 6);
    TrainingRun run(env(), n.model, n.adam,
                    {.program = "t", .epochs = 3, .steps_per_epoch = 2, .checkpoint = ck, .resume = true, .schedule = &cos});
    const std::string err = run.begin();
    EXPECT_TRUE(contains(err, "was written by a different run (run.lr_schedule: ")) << err;
    EXPECT_TRUE(contains(err, "t_max=4")) << err;
    EXPECT_TRUE(contains(err, "resume: ")) << err;  // plain words: this program has no options
    EXPECT_FALSE(contains(err, "--")) << err;
  }
  {  // another learning rate, and the program's own option names in the message
    Net n;
    n.adam.set_lr(2e-2);
    const LrSchedule cos = LrSchedule::cosine(1e-2, 4);
    TrainingRun run(env(), n.model, n.adam,
                    {.program = "t", .names = {.checkpoint = "--ck", .resume = "--again", .epochs = "--n"}, .epochs = 2,
                     .steps_per_epoch = 2, .checkpoint = ck, .resume = true, .schedule = &cos});
    const std::string err = run.begin();
    EXPECT_TRUE(contains(err, "--again: '" + ck + "' was written by a different run (run.optimizer: 'adam lr=0.01")) << err;
    EXPECT_TRUE(contains(err, "or another --ck file")) << err;
  }
  {  // without resuming: the file is in the way, said in plain words
    Net n;
    TrainingRun run(env(), n.model, n.adam, {.program = "t", .epochs = 2, .checkpoint = ck});
    const std::string err = run.begin();
    EXPECT_TRUE(contains(err, "checkpoint: '" + ck + "' exists; resume from it, or remove it to start over")) << err;
  }
}

}  // namespace
