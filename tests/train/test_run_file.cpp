// The run file (train/run_file.h) and the checkpoint files under it (core/checkpoint.h,
// write_file_atomic in core/util.h): a save/resume round trip that is bitwise (parameters,
// optimizer state, records, every rank's RNG words), another run's checkpoint refused naming
// what differs, the previous generation (PATH.prev) used with a warning when the newest is
// damaged or missing, both damaged refused naming both, stale temporaries removed, and nothing
// planted at the temporary's name (a symbolic link, a hard link, a directory) ever followed or
// truncated. Runs on 1 and 2 ranks (every rank restores; rank 0 reads and writes the files).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/checkpoint.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/util.h>
#include <hddp/distributed/mpi_env.h>
#include <hddp/distributed/watchdog.h>
#include <hddp/train/all_ranks.h>
#include <hddp/train/run_file.h>
#include "tests/common/testing.h"
#include "tests/train/train_testing.h"

using namespace hddp;
namespace fs = std::filesystem;

namespace {

using hddp::testing::env;

// A small training state: two tensors, Adam after `steps` steps on made-up gradients (the same
// on every rank), a per-rank RNG advanced by `steps` draws. `seed` makes another state of the same shapes.
struct State {
  ParamArena<float> params;
  Adam<float> adam;
  Rng rng;
  explicit State(uint64_t seed, int steps = 0) : params(make_arena()), adam(params.size()), rng(seed, uint64_t(env().rank())) {
    Rng init(seed);  // the same on every rank, as data-parallel training keeps them
    for (int64_t i = 0; i < params.size(); ++i) params.params()[i] = init.uniform(-1.0f, 1.0f);
    for (int s = 0; s < steps; ++s) {
      for (int64_t i = 0; i < params.size(); ++i) params.grads()[i] = init.uniform(-1.0f, 1.0f);
      adam.step(params.params(), params.grads());
      rng.next_u64();  // this rank's own stream moves on
    }
  }
  static ParamArena<float> make_arena() {
    ParamArena<float> a;
    a.add("0.weight", 3, 4);
    a.add("0.bias", 1, 3);
    return a;
  }
};

std::vector<float> params_of(const State& s) { return {s.params.params(), s.params.params() + s.params.size()}; }
std::vector<std::vector<float>> adam_state_of(State& s) {
  std::vector<std::vector<float>> out;
  for (const StateBuffer<float>& b : s.adam.state()) out.emplace_back(b.data, b.data + b.size);
  return out;
}

const std::map<std::string, std::string> kId = {{"model", "Linear(4, 3)"}, {"seed", "7"}};

RunFileOptions options(const std::string& path, std::map<std::string, std::string> id = kId) {
  return {.path = path, .resume = true, .identity = std::move(id), .total_steps = 100};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The step a checkpoint file holds (rank 0).
int64_t step_in(const std::string& path) { return read_checkpoint(path).state.step; }

// Flips one byte in the middle of the file (the checksum then fails).
void flip_middle(const std::string& path) {
  std::string b = read_file(path);
  b[b.size() / 2] = char(b[b.size() / 2] ^ 0xff);
  hddp::testing_util::spit(path, b);
}

class RunFileTest : public ::testing::Test {
 protected:
  // One folder for the whole job: every rank names the same path, rank 0 makes and removes it.
  void SetUp() override {
    const char* test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    long id = env().root() ? long(::getpid()) : 0;
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    dir_ = fs::current_path() / ("run_file_tmp_" + std::to_string(id) + "_" + test);
    if (env().root()) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (env().root()) fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A run that saves `steps` (1..n) checkpoints of State(seed, step) to ck.
  void save_steps(const std::string& ck, std::initializer_list<int> steps, uint64_t seed = 1) {
    RunFile run(env(), wd_, options(ck));
    for (int s : steps) {
      State st(seed, s);
      run.save(s, st.params, st.adam, &st.rng, {{"losses", "step " + std::to_string(s)}});
    }
  }

  fs::path dir_;
  Watchdog wd_{MPI_COMM_WORLD, {.timeout_s = 60}};
};

TEST_F(RunFileTest, ResumeIsBitwise) {
  const std::string ck = path("ck");
  State saved(1, 5);
  const std::map<std::string, std::string> records = {{"losses", encode_floats({1.5f, -2.25f})}, {"note", "abc"}};
  {
    RunFile run(env(), wd_, options(ck));
    ASSERT_EQ(run.resume(saved.params, saved.adam, &saved.rng), "") << "no file yet: from scratch";
    EXPECT_EQ(run.start(), 0);
    EXPECT_TRUE(contains(run.kept_note(), "no checkpoint written yet")) << run.kept_note();
    run.save(5, saved.params, saved.adam, &saved.rng, records);
    EXPECT_EQ(run.saved_step(), 5);
    EXPECT_TRUE(contains(run.kept_note(), "'" + ck + "' (5 steps) is kept")) << run.kept_note();
  }
  State other(99, 2);  // other values everywhere, the same shapes
  RunFile run(env(), wd_, options(ck));
  ASSERT_EQ(run.resume(other.params, other.adam, &other.rng), "");
  EXPECT_EQ(run.start(), 5);
  EXPECT_EQ(run.records(), records);
  EXPECT_EQ(decode_floats(run.records().at("losses"), "losses"), (std::vector<float>{1.5f, -2.25f}));
  EXPECT_EQ(params_of(other), params_of(saved));  // exact: every bit
  EXPECT_EQ(adam_state_of(other), adam_state_of(saved));
  EXPECT_EQ(other.adam.steps(), saved.adam.steps());
  EXPECT_EQ(other.rng.state(), saved.rng.state()) << "this rank's own RNG words";
  // Training on continues identically.
  for (State* s : {&saved, &other}) {
    Rng grads(5);
    for (int64_t i = 0; i < s->params.size(); ++i) s->params.grads()[i] = grads.uniform(-1.0f, 1.0f);
    s->adam.step(s->params.params(), s->params.grads());
  }
  EXPECT_EQ(params_of(other), params_of(saved));
  if (env().root()) {
    const Checkpoint c = read_checkpoint(ck);
    EXPECT_EQ(c.state.world_size, env().size());
    ASSERT_EQ(c.state.rng.size(), size_t(env().size())) << "every rank's RNG state";
    EXPECT_EQ(c.state.identity, kId);
  }
}

TEST_F(RunFileTest, AnotherRunsCheckpointIsRefusedNamingWhatDiffers) {
  const std::string ck = path("ck");
  save_steps(ck, {3});
  State mine(42);
  const std::vector<float> before = params_of(mine);
  auto id = kId;
  id["seed"] = "8";
  RunFile run(env(), wd_, options(ck, id));
  const std::string err = run.resume(mine.params, mine.adam, &mine.rng);
  EXPECT_TRUE(contains(err, "was written by a different run (seed: '7' in the checkpoint, '8' now)")) << err;
  EXPECT_EQ(run.start(), 0);
  EXPECT_EQ(params_of(mine), before) << "nothing restored";
  // Past the run's total: refused too.
  RunFile short_run(env(), wd_, {.path = ck, .resume = true, .identity = kId, .total_steps = 2});
  EXPECT_TRUE(contains(short_run.resume(mine.params, mine.adam, &mine.rng), "holds 3 steps done, past this run's 2"));
  // Without resume an existing file is refused, not overwritten: in plain words, or in the
  // program's own option names where it gives them.
  RunFile no_resume(env(), wd_, {.path = ck, .identity = kId, .total_steps = 100});
  EXPECT_TRUE(contains(no_resume.resume(mine.params, mine.adam), "checkpoint: '" + ck + "' exists; resume from it, or remove it"));
  RunFile named(env(), wd_, {.path = ck, .identity = kId, .total_steps = 100, .names = {.checkpoint = "--ck", .resume = "--resume"}});
  EXPECT_TRUE(contains(named.resume(mine.params, mine.adam), "--ck: '" + ck + "' exists; pass --resume to continue from it"));
}

TEST_F(RunFileTest, EverySaveKeepsThePreviousGeneration) {
  const std::string ck = path("ck"), prev = previous_checkpoint(ck);
  EXPECT_EQ(prev, ck + ".prev");
  save_steps(ck, {1, 2, 3});
  if (env().root()) {
    EXPECT_EQ(step_in(ck), 3);
    EXPECT_EQ(step_in(prev), 2);
    int entries = 0;
    for (const auto& e : fs::directory_iterator(dir_)) {
      ++entries;
      EXPECT_TRUE(e.path() == ck || e.path() == prev) << e.path();
    }
    EXPECT_EQ(entries, 2) << "no temporary left";
  }
}

// The newest damaged (flipped byte, truncated, missing): the previous one is used, rank 0 warns
// naming both, and the next save replaces the damaged file while keeping the good previous one.
TEST_F(RunFileTest, DamagedNewestFallsBackToThePreviousWithAWarning) {
  const std::string ck = path("ck"), prev = previous_checkpoint(ck);
  for (const std::string damage : {"flipped", "truncated", "missing"}) {
    SCOPED_TRACE(damage);
    if (env().root()) {
      fs::remove(ck), fs::remove(prev);
    }
    save_steps(ck, {4, 6});
    if (env().root()) {
      if (damage == "flipped") flip_middle(ck);
      if (damage == "truncated") fs::resize_file(ck, fs::file_size(ck) - 5);
      if (damage == "missing") fs::remove(ck);  // a kill between the save's two renames
    }
    State expect(1, 4), got(77);
    RunFile run(env(), wd_, options(ck));
    ::testing::internal::CaptureStderr();
    const std::string err = run.resume(got.params, got.adam, &got.rng);
    const std::string warned = ::testing::internal::GetCapturedStderr();
    ASSERT_EQ(err, "");
    EXPECT_EQ(run.start(), 4);
    EXPECT_EQ(params_of(got), params_of(expect));
    EXPECT_EQ(got.rng.state(), expect.rng.state());
    EXPECT_EQ(run.records().at("losses"), "step 4");
    EXPECT_TRUE(contains(run.kept_note(), "'" + prev + "' (4 steps)")) << run.kept_note();
    if (env().root()) {
      EXPECT_TRUE(contains(warned, "warning: '" + ck + "'")) << warned;
      EXPECT_TRUE(contains(warned, "resuming from the previous checkpoint '" + prev + "'")) << warned;
      EXPECT_TRUE(contains(warned, damage == "flipped" ? "checksum" : damage == "truncated" ? "truncated" : "missing"))
          << warned;
    } else {
      EXPECT_EQ(warned, "") << "one warning, from rank 0";
    }
    State next(1, 5);
    run.save(5, next.params, next.adam, &next.rng, {});
    if (env().root()) {
      EXPECT_EQ(step_in(ck), 5);
      EXPECT_EQ(step_in(prev), 4) << "the good previous checkpoint is kept, the damaged one replaced";
    }
  }
}

TEST_F(RunFileTest, BothDamagedIsAnErrorNamingBoth) {
  const std::string ck = path("ck"), prev = previous_checkpoint(ck);
  save_steps(ck, {1, 2});
  if (env().root()) {
    flip_middle(ck);
    fs::resize_file(prev, 10);
  }
  State s(5);
  const std::vector<float> before = params_of(s);
  RunFile run(env(), wd_, options(ck));
  const std::string err = run.resume(s.params, s.adam, &s.rng);
  EXPECT_TRUE(contains(err, "cannot use checkpoint '" + ck + "' nor the previous one '" + prev + "'")) << err;
  EXPECT_TRUE(contains(err, "checksum mismatch")) << err;
  EXPECT_TRUE(contains(err, "truncated")) << err;
  EXPECT_EQ(params_of(s), before);
  // Only the newest, damaged, and no previous one: the newest's own error, as before.
  if (env().root()) fs::remove(prev);
  const std::string alone = run.resume(s.params, s.adam, &s.rng);
  EXPECT_TRUE(contains(alone, "checksum mismatch") && !contains(alone, ".prev")) << alone;
}

TEST_F(RunFileTest, StaleTemporariesAreRemovedAtStartAndBySaves) {
  const std::string ck = path("ck");
  const std::string own = ck + ".tmp." + std::to_string(::getpid()), dead = ck + ".tmp.999999999",
                    unrelated = ck + ".tmp.x1", other_file = path("other.tmp.123");
  if (env().root())
    for (const std::string& p : {own, dead, unrelated, other_file}) hddp::testing_util::spit(p, "half a checkpoint");
  State s(3);
  RunFile run(env(), wd_, options(ck));
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(run.resume(s.params, s.adam, &s.rng), "");
  const std::string said = ::testing::internal::GetCapturedStderr();
  if (env().root()) {
    EXPECT_FALSE(file_exists(own)) << "at start nothing of ours is in flight";
    EXPECT_FALSE(file_exists(dead));
    EXPECT_TRUE(file_exists(unrelated)) << "not a <path>.tmp.<pid> name";
    EXPECT_TRUE(file_exists(other_file)) << "another file's";
    EXPECT_TRUE(contains(said, "removed '" + dead + "'")) << said;
    // A save removes what a writer killed meanwhile left.
    hddp::testing_util::spit(dead, "x");
    hddp::testing_util::spit(ck + ".tmp.12", "x");
  }
  run.save(1, s.params, s.adam, &s.rng, {});
  if (env().root()) {
    EXPECT_FALSE(file_exists(dead));
    EXPECT_FALSE(file_exists(ck + ".tmp.12"));
    EXPECT_EQ(step_in(ck), 1);
  }
}

// Everything below writes files on rank 0 only (save_checkpoint is rank 0's part of a save).
class PlantedAtTemporary : public hddp::testing_util::TempDirTest {
 protected:
  TrainState state(int64_t step) const {
    TrainState st;
    st.step = step;
    return st;
  }
  std::string tmp_of(const std::string& p) const { return p + ".tmp." + std::to_string(::getpid()); }
};

TEST_F(PlantedAtTemporary, SymbolicLinkIsNeitherFollowedNorRemoved) {
  const std::string ck = path("ck"), victim = path("victim"), tmp = tmp_of(ck);
  State s(1);
  save_checkpoint(ck, s.params, s.adam, state(1));
  const std::string ck_before = read_file(ck);
  hddp::testing_util::spit(victim, "precious");
  ASSERT_EQ(::symlink(victim.c_str(), tmp.c_str()), 0);
  try {
    save_checkpoint(ck, s.params, s.adam, state(2));
    ADD_FAILURE() << "saved through a planted link";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "cannot create '" + tmp + "': a symbolic link of that name exists")) << e.what();
  }
  EXPECT_EQ(read_file(victim), "precious") << "the link's target is not truncated nor written";
  struct stat st{};
  EXPECT_TRUE(::lstat(tmp.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) << "the link is left as it is";
  EXPECT_EQ(read_file(ck), ck_before) << "the checkpoint is unchanged";
  EXPECT_FALSE(file_exists(previous_checkpoint(ck))) << "nothing rotated";
  // A link at another pid's temporary name is not a regular file: no stale-removal either.
  const std::string other = ck + ".tmp.1";
  ASSERT_EQ(::symlink(victim.c_str(), other.c_str()), 0);
  ASSERT_EQ(::unlink(tmp.c_str()), 0);
  save_checkpoint(ck, s.params, s.adam, state(3));
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_TRUE(::lstat(other.c_str(), &st) == 0 && S_ISLNK(st.st_mode));
  EXPECT_EQ(read_checkpoint(ck).state.step, 3);
}

// A hard link at the temporary's name (the same inode as a file of someone else's): created
// exclusively, the write goes to a new inode; the other file keeps its bytes.
TEST_F(PlantedAtTemporary, HardLinkTargetIsNotTruncated) {
  const std::string ck = path("ck"), victim = path("victim"), tmp = tmp_of(ck);
  hddp::testing_util::spit(victim, "precious");
  ASSERT_EQ(::link(victim.c_str(), tmp.c_str()), 0);
  State s(1);
  save_checkpoint(ck, s.params, s.adam, state(1));
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_EQ(read_checkpoint(ck).state.step, 1);
  EXPECT_FALSE(file_exists(tmp));
}

TEST_F(PlantedAtTemporary, DirectoryIsRefusedNamingIt) {
  const std::string ck = path("ck"), tmp = tmp_of(ck);
  fs::create_directory(tmp);
  hddp::testing_util::spit(tmp + "/inside", "kept");
  try {
    write_file_atomic(ck, "bytes");
    ADD_FAILURE() << "no refusal";
  } catch (const Error& e) {
    EXPECT_TRUE(contains(e.what(), "a directory of that name exists")) << e.what();
  }
  EXPECT_EQ(read_file(tmp + "/inside"), "kept");
  EXPECT_FALSE(file_exists(ck));
}

// A regular file at our own temporary's name (a killed process of the same pid, as in a
// container where rank 0 always has the same pid): replaced, the write succeeds.
TEST_F(PlantedAtTemporary, OwnStaleRegularFileIsReplaced) {
  const std::string ck = path("ck"), tmp = tmp_of(ck);
  hddp::testing_util::spit(tmp, "half of an old write");
  write_file_atomic(ck, "new");
  EXPECT_EQ(read_file(ck), "new");
  EXPECT_FALSE(file_exists(tmp));
}

TEST_F(PlantedAtTemporary, KeepPreviousRotatesOnlyOnceTheNewFileIsComplete) {
  const std::string p = path("f"), prev = path("f.prev");
  std::vector<std::string> seen;
  AtomicWriteOptions o;
  o.keep_previous = prev;
  o.at = [&](const char* moment) {
    // What a crash at this moment would leave: always one complete file.
    seen.push_back(std::string(moment) + ": " + (file_exists(p) ? read_file(p) : "-") + " / " +
                   (file_exists(prev) ? read_file(prev) : "-"));
  };
  write_file_atomic(p, "one", o);
  write_file_atomic(p, "two", o);
  EXPECT_EQ(seen, (std::vector<std::string>{"partial: - / -", "rotated: - / -", "partial: one / -", "rotated: - / one"}));
  EXPECT_EQ(read_file(p), "two");
  EXPECT_EQ(read_file(prev), "one");
}

}  // namespace

// A verdict reached on each rank alone: every rank gets the first failing rank's message, named
// by its rank, and a message of any length arrives at most 4 KiB long.
TEST(AgreeOnError, FirstFailingRankBoundedOnEveryRank) {
  const int last = env().size() - 1;
  EXPECT_EQ(agree_on_error(env(), ""), "");
  const std::string huge(100000, 'x');
  const std::string got = agree_on_error(env(), env().rank() == last ? huge : "");
  const std::string prefix = last == 0 ? "" : "rank " + std::to_string(last) + ": ";
  EXPECT_EQ(got.substr(0, prefix.size() + 3), prefix + "xxx");
  EXPECT_LE(got.size(), prefix.size() + 4096 + 32);
  EXPECT_NE(got.find("... (100000 bytes)"), std::string::npos) << got.substr(got.size() - 40);
  // Two ranks failing: the lower rank's message wins.
  const std::string two = agree_on_error(env(), "bad on " + std::to_string(env().rank()));
  EXPECT_EQ(two, "bad on 0");
}
