// Checkpoints and the command line against bad input:
//   - unit tests of core/checkpoint: round trip, identity differences, every refusal, and
//     that a refused restore changes nothing;
//   - a randomized fuzzer (deterministic seed) of the checkpoint loader: bit flips with and
//     without a re-sealed checksum, truncations, random bytes, header and descriptor field
//     mutations, and re-encoded files with mutated ckpt.* entries. Each input must either
//     load or throw hddp::Error (the loader's documented exception), never anything else;
//     crashes, hangs and sanitizer reports end the test binary;
//   - a randomized fuzzer of poly::parse_options: random argument lists from every flag and
//     good, bad and garbage values. Each must parse (and then satisfy every documented
//     constraint) or throw poly::UsageError.
// HDDP_FUZZ_ITERS scales the number of inputs (default 4000 per loader mutation kind, 5x that
// for the parser); HDDP_FUZZ_SEED changes the seed. Files live in a temporary folder under the
// working directory (the build tree under ctest), removed at the end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <hddp/core/checkpoint.h>
#include <hddp/core/util.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/serialize.h>
#include <hddp/kernels/check.h>
#include "poly_train/options.h"
#include "tests/common/testing.h"
#include "tests/common/mse.h"

using namespace hddp;
namespace fs = std::filesystem;

namespace {

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : dflt;
}
const int64_t kIters = env_int("HDDP_FUZZ_ITERS", 4000);
const uint64_t kSeed = uint64_t(env_int("HDDP_FUZZ_SEED", 20261130));

using hddp::testing_util::slurp;
using hddp::testing_util::spit;
// Recomputes the trailing checksum so a mutation reaches the parser behind it.
std::string reseal(std::string b) {
  if (b.size() < 8) return b;
  const uint64_t h = fnv1a64(b.data(), b.size() - 8);
  std::memcpy(b.data() + b.size() - 8, &h, 8);
  return b;
}

// An independent encoder of the .hddp layout (core/serialize.h), without write_tensor_file's
// fsync, so thousands of re-encoded files stay fast.
std::string encode(const std::vector<TensorData>& tensors, const Meta& meta) {
  std::string out("HDDP", 4);
  auto put = [&](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  put(uint32_t(1)), put(uint64_t(0)), put(uint32_t(1)), put(uint32_t(tensors.size())), put(uint32_t(meta.size()));
  put(uint32_t(0));
  for (const TensorData& t : tensors) put(uint32_t(t.name.size())), out += t.name, put(t.rows), put(t.cols);
  for (const auto& [k, v] : meta) put(uint32_t(k.size())), out += k, put(uint64_t(v.size())), out += v;
  for (const TensorData& t : tensors) out.append(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
  const uint64_t total = out.size() + 8;
  std::memcpy(out.data() + 8, &total, 8);
  put(uint64_t(0));
  return reseal(out);
}

// A small model, trained a few steps so the optimizer state is not zero.
struct Fixture {
  Rng init{7, 0};
  Sequential<float> model{{Linear(1, 4), Tanh(), Linear(4, 1, false)}, 8, init};
  Adam<float> adam{model.num_params(), AdamHyper{}};
  TrainState state;
  Fixture() {
    std::vector<float> x(8), y(8);
    Rng data(7, 1);
    for (int s = 0; s < 3; ++s) {
      for (int i = 0; i < 8; ++i) x[i] = data.uniform<float>(-1, 1), y[i] = x[i] * x[i];
      model.zero_grad();
      model.forward(x, 8);
      hddp::testing::backward_mse(model, y.data());
      adam.step(model.params(), model.grads());
    }
    state.step = 3, state.world_size = 2;
    state.rng = {Rng(7, 1).state(), Rng(7, 2).state()};
    state.records = {{"losses", std::string("\x00\x00\x00\x3f\x00\x00\x80\x3e", 8)}};
    state.identity = {{"layers", "Linear(1, 4) -> Tanh() -> Linear(4, 1, bias=False)"}, {"optimizer", "adam"}};
  }
};

class Faults : public hddp::testing_util::TempDirTest {};

TEST_F(Faults, CheckpointRoundTrip) {
  Fixture a;
  const std::string p = path("ck");
  save_checkpoint(p, a.model.arena(), a.adam, a.state);
  Fixture b;  // same shapes; zero its state so the restore is visible
  std::fill(b.model.params(), b.model.params() + b.model.num_params(), 0.0f);
  std::fill(b.adam.exp_avg().begin(), b.adam.exp_avg().end(), 0.0f);
  b.adam.set_steps(0);
  const Checkpoint c = read_checkpoint(p);
  EXPECT_EQ(c.state.step, 3);
  EXPECT_EQ(c.state.world_size, 2);
  EXPECT_EQ(c.state.rng, a.state.rng);
  EXPECT_EQ(c.state.records, a.state.records);
  EXPECT_EQ(c.state.identity, a.state.identity);
  EXPECT_EQ(identity_diff(c.state, 2, a.state.identity), "");
  restore_checkpoint(c, p, b.model.arena(), b.adam);
  EXPECT_EQ(0, std::memcmp(a.model.params(), b.model.params(), sizeof(float) * size_t(a.model.num_params())));
  EXPECT_EQ(a.adam.exp_avg(), b.adam.exp_avg());
  EXPECT_EQ(a.adam.exp_avg_sq(), b.adam.exp_avg_sq());
  EXPECT_EQ(b.adam.steps(), 3);
  // Writing the restored state gives the same bytes.
  save_checkpoint(path("ck2"), b.model.arena(), b.adam, c.state);
  EXPECT_EQ(slurp(p), slurp(path("ck2")));
}

TEST_F(Faults, IdentityDiffNamesEveryDifference) {
  TrainState s;
  s.world_size = 3;
  s.identity = {{"layers", "A"}, {"optimizer", "adam"}, {"seed", "42"}};
  EXPECT_EQ(identity_diff(s, 3, s.identity), "");
  EXPECT_EQ(identity_diff(s, 2, {{"layers", "B"}, {"optimizer", "adam"}, {"momentum", "0.9"}}),
            "world size (MPI ranks): 3 in the checkpoint, 2 now; layers: 'A' in the checkpoint, 'B' now; "
            "momentum: (none) in the checkpoint, '0.9' now; seed: '42' in the checkpoint, (none) now");
}

// Each defect is refused with hddp::Error whose message contains `want`.
void expect_refused(const std::string& p, const std::string& want) {
  try {
    read_checkpoint(p);
    ADD_FAILURE() << "accepted a checkpoint that should be refused (" << want << ")";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST_F(Faults, RefusesMalformedEntries) {
  Fixture a;
  std::vector<TensorRef> tensors;
  for (size_t i = 0; i < a.model.arena().num_tensors(); ++i) {
    const ParamView& v = a.model.arena().view(i);
    tensors.push_back({v.name, v.rows, v.cols, a.model.arena().param(i)});
  }
  const std::string p = path("m");
  save_checkpoint(p, a.model.arena(), a.adam, a.state);
  const Meta good = read_tensor_file(p).meta;
  auto with = [&](const std::string& key, const std::string* value) {
    Meta m = good;
    if (value) m[key] = *value;
    else m.erase(key);
    write_tensor_file(p, DType::Float32, tensors, m);
  };
  const std::string one = encode_u64s({1}), zero = encode_u64s({0}), short_ = "abc";
  with("ckpt.version", nullptr), expect_refused(p, "not a training checkpoint");
  with("ckpt.version", &one), expect_refused(p, "checkpoint version 1; this build reads version 2");
  with("ckpt.version", &short_), expect_refused(p, "expected 8 (one u64)");
  with("ckpt.step", nullptr), expect_refused(p, "entry 'ckpt.step' is missing");
  with("ckpt.world_size", &zero), expect_refused(p, "world size 0 outside");
  const std::string three = encode_u64s({3});
  with("ckpt.world_size", &three), expect_refused(p, "entry 'ckpt.rng' has 64 bytes, expected 0 or 96");  // 2 ranks' states
  const std::string huge = encode_u64s({~uint64_t(0)});
  with("ckpt.step", &huge), expect_refused(p, "step 18446744073709551615 is out of range");
  const std::string zero_rng(64, '\0');
  with("ckpt.rng", &zero_rng), expect_refused(p, "RNG state is all zero");
  with("ckpt.rng", &short_), expect_refused(p, "entry 'ckpt.rng' has 3 bytes");
  with("ckpt.rng", nullptr), expect_refused(p, "entry 'ckpt.rng' is missing");
  // A plain model file (save_state) is not a checkpoint.
  save_state<float>(p, a.model.arena(), &a.adam);
  expect_refused(p, "not a training checkpoint");
}

TEST_F(Faults, RefusedRestoreChangesNothing) {
  Fixture a;
  const std::string p = path("r");
  save_checkpoint(p, a.model.arena(), a.adam, a.state);
  // Another model: a layer wider.
  Rng init(1, 0);
  Sequential<float> other({Linear(1, 5), Tanh(), Linear(5, 1, false)}, 8, init);
  Adam<float> adam(other.num_params(), AdamHyper{});
  const std::vector<float> before(other.params(), other.params() + other.num_params());
  const Checkpoint c = read_checkpoint(p);
  EXPECT_THROW(restore_checkpoint(c, p, other.arena(), adam), Error);
  EXPECT_EQ(before, std::vector<float>(other.params(), other.params() + other.num_params()));
  EXPECT_EQ(adam.steps(), 0);
  // Another optimizer.
  Fixture b;
  SGD<float> sgd(b.model.num_params(), SgdHyper{0.1, 0.9});
  const std::vector<float> pb(b.model.params(), b.model.params() + b.model.num_params());
  std::fill(b.model.params(), b.model.params() + b.model.num_params(), 1.0f);
  EXPECT_THROW(restore_checkpoint(c, p, b.model.arena(), sgd), Error);
  for (int64_t i = 0; i < b.model.num_params(); ++i) ASSERT_EQ(b.model.params()[i], 1.0f);
  // A non-finite parameter (checksum re-sealed): refused before anything is copied.
  std::string bytes = slurp(p);
  const TensorFile f = read_tensor_file(p);
  ASSERT_EQ(f.tensors[0].name, "0.weight");
  // The payload (every tensor, in order) ends right before the 8-byte checksum.
  size_t payload = 0;
  for (const TensorData& t : f.tensors) payload += t.bytes.size();
  const size_t at = bytes.size() - 8 - payload;
  ASSERT_EQ(0, std::memcmp(bytes.data() + at, f.tensors[0].bytes.data(), 4));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bytes.data() + at, &nan, 4);
  spit(p, reseal(bytes));
  const Checkpoint bad = read_checkpoint(p);
  Fixture d;
  std::fill(d.model.params(), d.model.params() + d.model.num_params(), 2.0f);
  try {
    restore_checkpoint(bad, p, d.model.arena(), d.adam);
    ADD_FAILURE() << "a NaN parameter was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
  }
  for (int64_t i = 0; i < d.model.num_params(); ++i) ASSERT_EQ(d.model.params()[i], 2.0f);
}

// The fuzzing harness: load `bytes` as a checkpoint; success or hddp::Error only. Returns
// true if it loaded (and then restoring and comparing must not misbehave either).
class Loader {
 public:
  explicit Loader(std::string p) : path_(std::move(p)) {}
  bool operator()(const std::string& bytes) {
    // Unlink first: ext4 flushes a file truncated and rewritten in place on close
    // (auto_da_alloc), which made each input cost ~10 ms of waiting.
    std::remove(path_.c_str());
    spit(path_, bytes);
    ++tried_;
    try {
      const Checkpoint c = read_checkpoint(path_);
      // A loaded checkpoint must be internally consistent.
      EXPECT_GE(c.state.world_size, 1);
      EXPECT_TRUE(c.state.rng.empty() || c.state.rng.size() == size_t(c.state.world_size));
      EXPECT_GE(c.state.step, 0);
      (void)identity_diff(c.state, 2, fx_.state.identity);
      try {
        restore_checkpoint(c, path_, fx_.model.arena(), fx_.adam);
      } catch (const Error&) {
      }
      ++loaded_;
      return true;
    } catch (const Error&) {
      return false;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "undocumented exception " << typeid(e).name() << ": " << e.what();
      return false;
    }
  }
  int64_t tried() const { return tried_; }
  int64_t loaded() const { return loaded_; }

 private:
  std::string path_;
  Fixture fx_;
  int64_t tried_ = 0, loaded_ = 0;
};

TEST_F(Faults, FuzzCheckpointLoader) {
  Fixture a;
  const std::string p = path("seed.ckpt");
  save_checkpoint(p, a.model.arena(), a.adam, a.state);
  const std::string good = slurp(p);
  ASSERT_GT(good.size(), 100u);
  Loader load(path("fuzz.ckpt"));
  ASSERT_TRUE(load(good));
  Rng rng(kSeed, 0);
  auto below = [&](uint64_t n) { return n ? rng.next_u64() % n : 0; };
  const uint64_t interesting[] = {0, 1, 2, 7, 8, 31, 32, 255, 256, 0x7fffffff, 0x80000000, 0xffffffff,
                                  uint64_t(good.size()), uint64_t(good.size()) - 8, uint64_t(good.size()) + 8,
                                  0x7fffffffffffffffULL, 0xffffffffffffffffULL};

  // 1. Bit flips without a re-sealed checksum: always refused.
  for (int64_t i = 0; i < kIters; ++i) {
    std::string b = good;
    for (uint64_t k = 0, n = 1 + below(8); k < n; ++k) b[below(b.size())] ^= char(1u << below(8));
    if (b == good) continue;
    EXPECT_FALSE(load(b)) << "a flipped file loaded (iteration " << i << ")";
  }
  // 2. Bit flips with the checksum re-sealed: the parser behind it sees them.
  int64_t sealed_loaded = 0;
  for (int64_t i = 0; i < kIters; ++i) {
    std::string b = good;
    for (uint64_t k = 0, n = 1 + below(4); k < n; ++k) b[below(b.size() - 8)] ^= char(1u << below(8));
    sealed_loaded += load(reseal(b));
  }
  // 3. Truncations (and re-sealed truncations): always refused.
  for (int64_t i = 0; i < kIters; ++i) {
    const size_t n = below(good.size());
    EXPECT_FALSE(load(good.substr(0, n))) << "truncated to " << n;
    EXPECT_FALSE(load(reseal(good.substr(0, n)))) << "truncated and re-sealed to " << n;
  }
  // 4. Random bytes, and random bytes behind a valid magic and version.
  for (int64_t i = 0; i < kIters; ++i) {
    std::string b(below(2 * good.size()), '\0');
    for (char& c : b) c = char(rng.next_u64());
    EXPECT_FALSE(load(b));
    if (b.size() >= 8) {
      std::memcpy(b.data(), good.data(), 8);
      load(reseal(b));
    }
  }
  // 5. Header and descriptor fields: a 4- or 8-byte field anywhere in the first part of the
  // file (header, descriptors, metadata lengths) set to an interesting value, re-sealed.
  const size_t structure = std::min<size_t>(good.size() - 8, 600);
  for (int64_t i = 0; i < kIters; ++i) {
    std::string b = good;
    const size_t width = below(2) ? 8 : 4;
    const size_t at = below(structure - width);
    const uint64_t v = below(4) ? interesting[below(std::size(interesting))] : rng.next_u64();
    std::memcpy(b.data() + at, &v, width);
    load(reseal(b));
  }
  // 6. Re-encoded files with mutated ckpt.* and optimizer entries (the checksum is right, so
  // only the checkpoint layer can refuse them).
  const TensorFile gf = read_tensor_file(p);
  ASSERT_EQ(encode(gf.tensors, gf.meta), good);  // the test's encoder writes the same bytes
  std::vector<std::string> keys;
  for (const auto& [k, v] : gf.meta) keys.push_back(k);
  for (int64_t i = 0; i < kIters; ++i) {
    Meta m = gf.meta;
    const std::string& key = keys[below(keys.size())];
    switch (below(5)) {
      case 0: m.erase(key); break;
      case 1: m[key] = encode_u64s({interesting[below(std::size(interesting))]}); break;
      case 2: m[key].resize(below(m[key].size() + 16)); break;
      case 3:
        if (!m[key].empty()) m[key][below(m[key].size())] ^= char(1u << below(8));
        break;
      case 4: m["ckpt.x" + std::to_string(below(3))] = std::string(below(40), 'z'); break;
    }
    std::vector<TensorData> ts = gf.tensors;
    if (below(4) == 0) ts.erase(ts.begin() + std::ptrdiff_t(below(ts.size())));
    load(encode(ts, m));
  }
  std::printf("checkpoint loader: %lld inputs, %lld loaded (%lld re-sealed flips); seed %llu\n",
              (long long)load.tried(), (long long)load.loaded(), (long long)sealed_loaded,
              (unsigned long long)kSeed);
  EXPECT_GE(load.tried(), 6 * kIters);
}

// ---- the command line --------------------------------------------------------------------

const char* const kFlags[] = {"--epochs", "--batch-size", "--lr", "--optimizer", "--momentum", "--function",
                              "--hidden", "--seed", "--sampling", "--log-every", "--out", "--plot", "--no-plot",
                              "--bucket-mb", "--first-bucket-mb", "--reduce-mode", "--progress", "--threads",
                              "--gemm", "--trace", "--stats", "--help", "--checkpoint", "--checkpoint-every",
                              "--resume", "--check-every", "--debug-inject-nan", "--debug-throw", "--bogus", "-x", ""};
const char* const kValues[] = {"0", "1", "-1", "2", "32", "1000", "1e-3", "0.5", "0.9", "1", "-0", "nan", "inf",
                               "-inf", "1e309", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                               "1000000000", "1000000001", "", " ", "abc", "12abc", "0x10", "+5", "1,2", "20,", ",",
                               "20,,3", "256,256", "65536", "65537", "adam", "sgd", "poly", "griewank", "per-rank",
                               "sharded", "test", "thread", "blocking", "auto", "blocked", "openblas", "naive", "/tmp", "ck", "5:1", "5:",
                               ":1", "5:-1", "-5:1", "5:1:2", "5:1048577", "=", "--epochs"};

void check_invariants(const poly::Options& o) {
  EXPECT_GE(o.epochs, 1);
  EXPECT_LE(o.epochs, poly::kMaxEpochs);
  EXPECT_GE(o.batch_size, 1);
  EXPECT_TRUE(o.lr > 0 && std::isfinite(o.lr));
  EXPECT_TRUE(o.momentum >= 0 && o.momentum < 1);
  EXPECT_FALSE(o.hidden.empty());
  for (int64_t w : o.hidden) EXPECT_TRUE(w >= 1 && w <= 65536);
  EXPECT_TRUE(o.optimizer == poly::OptimizerKind::Adam || o.optimizer == poly::OptimizerKind::Sgd);
  EXPECT_TRUE(o.function == poly::Function::Poly || o.function == poly::Function::Griewank);
  EXPECT_TRUE(o.sampling == poly::Sampling::PerRank || o.sampling == poly::Sampling::Sharded);
  EXPECT_GE(o.log_every, 1);
  EXPECT_FALSE(o.out.empty());
  EXPECT_TRUE(o.bucket_mb.value_or(1) > 0 && o.first_bucket_mb.value_or(1) > 0);
  if (!o.first_bucket_mb) {
    EXPECT_FALSE(o.bucket_mb.has_value());
  }
  EXPECT_TRUE(o.threads >= 0 && o.threads <= 4096);
  EXPECT_GE(o.checkpoint_every, 0);
  EXPECT_GE(o.check_every, 0);
  if (o.checkpoint_every > 0 || o.resume) {
    EXPECT_FALSE(o.checkpoint.empty());
  }
  for (const auto* in : {&o.inject_nan, &o.inject_throw}) {
    EXPECT_GE(in->epoch, -1);
    EXPECT_GE(in->rank, 0);
  }
}

TEST(FaultsCli, FuzzParseOptions) {
  Rng rng(kSeed, 1);
  auto below = [&](uint64_t n) { return n ? rng.next_u64() % n : 0; };
  int64_t ok = 0, refused = 0;
  const int64_t n = 5 * kIters;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<std::string> args;
    for (uint64_t k = 0, m = below(7); k < m; ++k) {
      std::string a;
      switch (below(6)) {
        case 0: a = kValues[below(std::size(kValues))]; break;                        // a stray value
        case 1: a = std::string(kFlags[below(std::size(kFlags))]) + "=" + kValues[below(std::size(kValues))]; break;
        case 2: {                                                                      // random bytes
          a.resize(below(12));
          for (char& c : a) c = char(1 + below(255));
          break;
        }
        default:                                                                       // flag, then value
          a = kFlags[below(std::size(kFlags))];
          if (below(4)) args.push_back(a), a = kValues[below(std::size(kValues))];
      }
      args.push_back(a);
    }
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    try {
      const poly::Options o = poly::parse_options(int(argv.size()), argv.data());
      check_invariants(o);
      ++ok;
    } catch (const poly::UsageError& e) {
      EXPECT_GT(std::strlen(e.what()), 0u);
      ++refused;
    } catch (const std::exception& e) {
      std::string all;
      for (const std::string& a : args) all += " '" + a + "'";
      ADD_FAILURE() << "undocumented exception " << typeid(e).name() << " for" << all << ": " << e.what();
    }
  }
  std::printf("parse_options: %lld argument lists, %lld accepted, %lld refused\n", (long long)n, (long long)ok,
              (long long)refused);
  EXPECT_GT(ok, 0);
  EXPECT_GT(refused, 0);
  EXPECT_FALSE(poly::help_text("poly_train").empty());
}

TEST(FaultsCli, CheckpointFlags) {
  auto parse = [](std::vector<const char*> v) { return poly::parse_options(int(v.size()), v.data()); };
  const poly::Options o = parse({"--checkpoint", "a.ckpt", "--checkpoint-every", "100", "--resume",
                                 "--debug-inject-nan", "5:2", "--debug-throw=7"});
  EXPECT_EQ(o.checkpoint, "a.ckpt");
  EXPECT_EQ(o.checkpoint_every, 100);
  EXPECT_TRUE(o.resume);
  EXPECT_EQ(o.inject_nan.epoch, 5);
  EXPECT_EQ(o.inject_nan.rank, 2);
  EXPECT_EQ(o.inject_throw.epoch, 7);
  EXPECT_EQ(o.inject_throw.rank, 0);
  EXPECT_THROW(parse({"--resume"}), poly::UsageError);
  EXPECT_THROW(parse({"--checkpoint-every", "5"}), poly::UsageError);
  EXPECT_THROW(parse({"--checkpoint", ""}), poly::UsageError);
  EXPECT_THROW(parse({"--checkpoint", "c", "--checkpoint-every", "-1"}), poly::UsageError);
  EXPECT_THROW(parse({"--resume=1", "--checkpoint", "c"}), poly::UsageError);
  EXPECT_THROW(parse({"--debug-inject-nan", "-1"}), poly::UsageError);
  EXPECT_THROW(parse({"--debug-inject-nan", "3:"}), poly::UsageError);
  EXPECT_THROW(parse({"--check-every", "-2"}), poly::UsageError);
  EXPECT_THROW(parse({"--epochs", "1000000001"}), poly::UsageError);
}

}  // namespace
