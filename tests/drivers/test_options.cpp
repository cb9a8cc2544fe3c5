// poly_train's command line (drivers/poly_train/options.cpp over drivers/common/options.h,
// CLI11): --config FILE (TOML/INI,
// keys the long options without dashes) and the command line over it, and the messages of
// bad input. Config files live in a temporary folder under the working directory (the build
// tree under ctest), removed at the end.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "poly_train/options.h"
#include "tests/common/testing.h"

namespace {

using hddp::testing_util::spit;

poly::Options parse(std::vector<std::string> args) {
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return poly::parse_options(int(argv.size()), argv.data());
}

// The UsageError message of parse(args); a test failure if it parses.
std::string refusal(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const poly::UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

class Options : public hddp::testing_util::TempDirTest {};

TEST_F(Options, ConfigFileValuesAreUsed) {
  const std::string cfg = path("train.toml");
  spit(cfg,
       "# poly_train options\n"
       "epochs = 200\n"
       "hidden = \"64,64\"\n"
       "optimizer = \"sgd\"\n"
       "lr = 0.05\n"
       "sampling = \"sharded\"\n"
       "no-plot = true\n"
       "stats = true\n"
       "bucket-mb = \"auto\"\n"
       "debug-inject-nan = \"5:1\"\n");
  const poly::Options o = parse({"--config", cfg});
  EXPECT_EQ(o.epochs, 200);
  EXPECT_EQ(o.hidden, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(o.optimizer, poly::OptimizerKind::Sgd);
  EXPECT_DOUBLE_EQ(o.lr, 0.05);
  EXPECT_EQ(o.sampling, poly::Sampling::Sharded);
  EXPECT_FALSE(o.plot);
  EXPECT_TRUE(o.stats);
  EXPECT_FALSE(o.bucket_mb.has_value());  // auto
  EXPECT_EQ(o.inject_nan.epoch, 5);
  EXPECT_EQ(o.inject_nan.rank, 1);
  EXPECT_EQ(o.batch_size, poly::Options{}.batch_size);  // not in the file: the default
  // A TOML array for the widths, and --config=FILE.
  spit(cfg, "hidden = [32, 16, 8]\n");
  EXPECT_EQ(parse({"--config=" + cfg}).hidden, (std::vector<int64_t>{32, 16, 8}));
}

TEST_F(Options, CommandLineOverridesConfigFile) {
  const std::string cfg = path("train.toml");
  spit(cfg, "epochs = 200\nhidden = \"64,64\"\nplot = false\nreduce-mode = \"thread\"\n");
  const poly::Options o = parse({"--epochs", "7", "--config", cfg, "--plot", "--reduce-mode=blocking"});
  EXPECT_EQ(o.epochs, 7);
  EXPECT_EQ(o.hidden, (std::vector<int64_t>{64, 64}));  // from the file
  EXPECT_TRUE(o.plot);
  EXPECT_EQ(o.mode, hddp::ReduceMode::Blocking);
  // A bad value in the file is refused like one on the command line, naming the flag.
  spit(cfg, "epochs = 0\n");
  EXPECT_NE(refusal({"--config", cfg}).find("--epochs"), std::string::npos);
  // ... unless the command line overrides it.
  EXPECT_EQ(parse({"--config", cfg, "--epochs", "3"}).epochs, 3);
}

TEST_F(Options, UnknownConfigKeyIsAnError) {
  const std::string cfg = path("bad.toml");
  spit(cfg, "epochs = 200\nbogus-key = 1\n");
  const std::string msg = refusal({"--config", cfg});
  EXPECT_NE(msg.find("bogus-key"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--config"), std::string::npos) << msg;
}

TEST_F(Options, MissingConfigFileIsAnError) {
  const std::string cfg = path("no-such.toml");
  const std::string msg = refusal({"--config", cfg});
  EXPECT_NE(msg.find("no-such.toml"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--config"), std::string::npos) << msg;
  EXPECT_NE(refusal({"--config"}).find("--config: missing value"), std::string::npos);
}

TEST(OptionsCli, MessagesNameTheFlag) {
  EXPECT_EQ(refusal({"--bogus"}), "unknown option '--bogus'");
  EXPECT_EQ(refusal({"--bogus=3"}), "unknown option '--bogus'");
  EXPECT_EQ(refusal({"stray"}), "unexpected argument 'stray'");
  EXPECT_EQ(refusal({"--epochs"}), "--epochs: missing value");
  EXPECT_EQ(refusal({"--epochs", "ten"}), "--epochs: expected an integer, got 'ten'");
  EXPECT_EQ(refusal({"--epochs=-5"}), "--epochs: must be in [1, 1000000000], got -5");
  EXPECT_EQ(refusal({"--lr", "-1"}), "--lr: must be > 0, got -1");
  EXPECT_EQ(refusal({"--lr", "nan"}), "--lr: expected a number, got 'nan'");
  EXPECT_EQ(refusal({"--momentum", "1"}), "--momentum: must be in [0, 1), got 1");
  EXPECT_EQ(refusal({"--timeout", "0.5"}), "--timeout: must be 0 (off) or in [1, 10000000], got 0.5");
  EXPECT_EQ(refusal({"--hidden", "64,0"}), "--hidden: must be in [1, 65536], got 0");
  EXPECT_EQ(refusal({"--hidden", "20,,3"}), "--hidden: expected a ','-separated list without empty items, got '20,,3'");
  EXPECT_EQ(refusal({"--seed", "-3"}), "--seed: must be in [0, 9223372036854775807], got -3");
  EXPECT_EQ(refusal({"--optimizer", "rmsprop"}), "--optimizer: expected one of adam, adamw, sgd, got 'rmsprop'");
  EXPECT_EQ(refusal({"--reduce-mode", "overlap"}), "--reduce-mode: expected one of blocking, test, thread, got 'overlap'");
  EXPECT_EQ(refusal({"--gemm=fast"}), "--gemm: expected one of blocked, openblas, naive, got 'fast'");
  EXPECT_EQ(refusal({"--stats=1"}), "--stats: takes no value");
  EXPECT_EQ(refusal({"--trace="}), "--trace: must not be empty");
  EXPECT_EQ(refusal({"--bucket-mb", "autox"}), "--bucket-mb: expected a number or auto, got 'autox'");
  EXPECT_EQ(refusal({"--first-bucket-mb", "auto"}), "--first-bucket-mb auto: needs --bucket-mb auto");
  EXPECT_EQ(refusal({"--debug-inject-nan", "3:-1"}), "--debug-inject-nan: rank: must be in [0, 1048576], got -1");
  // Only the names of an enum (CLI11 alone would take its number: "1" for sgd).
  EXPECT_EQ(refusal({"--optimizer", "1"}), "--optimizer: expected one of adam, adamw, sgd, got '1'");
  EXPECT_EQ(refusal({"--reduce-mode=0"}), "--reduce-mode: expected one of blocking, test, thread, got '0'");
  // A list is one argument.
  EXPECT_EQ(refusal({"--hidden", "20", "30"}), "unexpected argument '30'");
  EXPECT_EQ(refusal({"--debug-throw", "x:1"}), "--debug-throw: epoch: expected an integer, got 'x'");
}

TEST(OptionsCli, LaterFlagsWin) {
  EXPECT_EQ(parse({"--epochs", "5", "--epochs=6"}).epochs, 6);
  EXPECT_FALSE(parse({"--plot", "--no-plot"}).plot);
  EXPECT_TRUE(parse({"--no-plot", "--plot"}).plot);
  EXPECT_EQ(parse({"--reduce-mode", "thread", "--reduce-mode", "test"}).mode, hddp::ReduceMode::Test);
  EXPECT_EQ(parse({"--hidden", "8", "--hidden=4,2"}).hidden, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(parse({"--hidden", "4,2", "--out", "--hidden", "--hidden", "8"}).hidden, (std::vector<int64_t>{8}));
  EXPECT_EQ(parse({"--out", "--epochs"}).out, "--epochs");  // the value after a value option, whatever it is
  const poly::Options a = parse({"--bucket-mb", "auto", "--first-bucket-mb=auto"});
  EXPECT_TRUE(!a.bucket_mb && !a.first_bucket_mb);
  EXPECT_EQ(parse({"--bucket-mb", "auto", "--bucket-mb", "3"}).bucket_mb, 3.0);
}

TEST(OptionsCli, HelpNamesEveryGroupAndTheConfigFile) {
  const std::string h = poly::help_text("poly_train");
  for (const char* s : {"Usage: [mpiexec -n P] poly_train", "Training:", "Output:", "Parallelism:",
                        "Checkpoints and faults:", "Debugging (tests):", "--config", "--epochs N=1000",
                        "--no-plot", "Exit codes:", "SIGTERM or SIGUSR1"})
    EXPECT_NE(h.find(s), std::string::npos) << s << "\n" << h;
}

// The reducer mode has one spelling: the old ones are refused, on the command line and in a
// --config file, naming the new one.
TEST_F(Options, RemovedSpellingsNameTheirReplacement) {
  EXPECT_EQ(refusal({"--no-overlap"}), "--no-overlap: removed; write --reduce-mode blocking");
  EXPECT_EQ(refusal({"--progress=thread"}), "--progress: removed; write --reduce-mode test|thread");
  const std::string cfg = path("old.toml");
  spit(cfg, "progress = \"thread\"\n");
  const std::string msg = refusal({"--config", cfg});
  EXPECT_NE(msg.find("'progress' was removed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--reduce-mode"), std::string::npos) << msg;
  spit(cfg, "reduce-mode = \"thread\"\n");
  EXPECT_EQ(parse({"--config", cfg}).mode, hddp::ReduceMode::Thread);
  EXPECT_EQ(parse({"--config", cfg, "--reduce-mode", "blocking"}).mode, hddp::ReduceMode::Blocking);
}

// The ranks compare Options::source_hash: the same arguments and file give the same hash; a
// different argument or a different file gives another.
TEST_F(Options, SourceHashFollowsArgumentsAndFile) {
  const std::string cfg = path("c.toml");
  spit(cfg, "epochs = 7\n");
  const uint64_t a = parse({"--config", cfg, "--lr", "0.01"}).source_hash;
  EXPECT_EQ(parse({"--config", cfg, "--lr", "0.01"}).source_hash, a);
  EXPECT_NE(parse({"--config", cfg, "--lr", "0.02"}).source_hash, a);
  spit(cfg, "epochs = 8\n");
  EXPECT_NE(parse({"--config", cfg, "--lr", "0.01"}).source_hash, a) << "the file's bytes count";
}

}  // namespace
