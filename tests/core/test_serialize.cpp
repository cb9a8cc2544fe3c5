// Save/load: round trip of parameters + optimizer state + metadata (and resuming gives the
// same trajectory); every corruption refused with a clear error and the destination left
// untouched: truncation, any flipped byte, wrong version, wrong magic, trailing bytes, other
// shapes/names/dtype/optimizer. Files live in a temporary folder under the working directory
// (the build tree under ctest), removed at the end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/serialize.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>
#include "tests/common/testing.h"
#include "tests/common/mse.h"

using namespace hddp;
namespace fs = std::filesystem;

namespace {

class Serialize : public hddp::testing_util::TempDirTest {};

using hddp::testing_util::slurp;
using hddp::testing_util::spit;

// Independent FNV-1a 64, to re-seal a file after patching it.
uint64_t fnv(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}
std::string reseal(std::string bytes) {
  bytes.resize(bytes.size() - 8);
  const uint64_t h = fnv(bytes);
  bytes.append(reinterpret_cast<const char*>(&h), 8);
  return bytes;
}

// A small trained model and its optimizer.
std::vector<LayerSpec> small_mlp() {
  static const std::vector<LayerSpec> specs = {Linear(2, 6), Tanh(), Linear(6, 1)};
  return specs;
}

struct Trained {
  Rng rng{3};
  Sequential<float> model{small_mlp(), 8, rng};
  Adam<float> adam{model.num_params(), {.lr = 0.01}};
  std::vector<float> x = std::vector<float>(16), y = std::vector<float>(8);
  // noinline: GCC 12 reports a false -Wdangling-pointer when this is inlined into a test body.
  __attribute__((noinline)) explicit Trained(int steps) {
    for (int i = 0; i < 16; ++i) x[i] = float(i % 5) * 0.25f - 0.5f;
    for (int i = 0; i < 8; ++i) y[i] = float(i % 3) * 0.3f - 0.3f;
    for (int s = 0; s < steps; ++s) step();
  }
  void step() {
    model.zero_grad();
    model.forward(x, 8);
    hddp::testing::backward_mse(model, y.data());
    adam.step(model.arena());
  }
};

std::vector<float> snapshot(const Sequential<float>& m) { return {m.params(), m.params() + m.num_params()}; }

template <class F>
std::string load_error(F&& f) {
  try {
    f();
  } catch (const hddp::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception type: ") + e.what();
  }
  return "no error";
}

TEST(Fnv1a64, PublishedVectors) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
}

TEST_F(Serialize, RoundTripAndResume) {
  Trained a(5);
  const std::string p = path("a.hddp");
  const Meta extra = {{"epoch", encode_u64s({7})}, {"rng", encode_u64s({1, 2, 3, 4})}, {"note", "hello"}};
  save_state(p, a.model.arena(), &a.adam, extra);

  Trained b(1);  // different weights and optimizer state
  ASSERT_NE(snapshot(a.model), snapshot(b.model));
  Meta got;
  load_state(p, b.model.arena(), &b.adam, &got);
  EXPECT_EQ(snapshot(a.model), snapshot(b.model));
  EXPECT_EQ(a.adam.exp_avg(), b.adam.exp_avg());
  EXPECT_EQ(a.adam.exp_avg_sq(), b.adam.exp_avg_sq());
  EXPECT_EQ(b.adam.steps(), 5);
  EXPECT_EQ(got, extra);
  EXPECT_EQ(decode_u64s(got.at("rng"), "rng"), (std::vector<uint64_t>{1, 2, 3, 4}));

  // Resuming continues exactly where the original goes.
  for (int s = 0; s < 3; ++s) a.step(), b.step();
  EXPECT_EQ(snapshot(a.model), snapshot(b.model));

  // Only the final file remains (written through a temporary + rename), and saving again
  // replaces it.
  save_state(p, b.model.arena(), &b.adam);
  size_t files = 0;
  for (auto& e : fs::directory_iterator(dir_)) {
    ++files;
    EXPECT_EQ(e.path().filename(), "a.hddp");
  }
  EXPECT_EQ(files, 1u);

  // Parameters only: loads into a model without touching an optimizer.
  Trained c(0);
  load_state<float>(p, c.model.arena());
  EXPECT_EQ(snapshot(c.model), snapshot(b.model));
}

TEST_F(Serialize, GenericTensorFile) {
  const std::string p = path("g.hddp");
  const double d[6] = {1, 2, 3, 4, 5, 6};
  write_tensor_file(p, DType::Float64, {{"w", 2, 3, d}, {"empty", 0, 4, nullptr}}, {{"k", "v"}});
  const TensorFile f = read_tensor_file(p);
  EXPECT_EQ(f.dtype, DType::Float64);
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].name, "w");
  EXPECT_EQ(f.tensors[0].rows, 2);
  EXPECT_EQ(f.tensors[0].cols, 3);
  ASSERT_EQ(f.tensors[0].bytes.size(), 48u);
  EXPECT_EQ(std::memcmp(f.tensors[0].bytes.data(), d, 48), 0);
  EXPECT_EQ(f.tensors[1].bytes.size(), 0u);
  EXPECT_EQ(f.meta.at("k"), "v");
  // The documented header, byte by byte.
  const std::string bytes = slurp(p);
  EXPECT_EQ(bytes.substr(0, 4), "HDDP");
  uint32_t version, dtype, nt, nm;
  uint64_t total;
  std::memcpy(&version, bytes.data() + 4, 4);
  std::memcpy(&total, bytes.data() + 8, 8);
  std::memcpy(&dtype, bytes.data() + 16, 4);
  std::memcpy(&nt, bytes.data() + 20, 4);
  std::memcpy(&nm, bytes.data() + 24, 4);
  EXPECT_EQ(version, 1u);
  EXPECT_EQ(total, bytes.size());
  EXPECT_EQ(dtype, 2u);
  EXPECT_EQ(nt, 2u);
  EXPECT_EQ(nm, 1u);
  uint64_t sum;
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  EXPECT_EQ(sum, fnv(bytes.substr(0, bytes.size() - 8)));

  EXPECT_THROW(write_tensor_file(p, DType::Float64, {{"w", 1, 1, d}, {"w", 1, 1, d}}, {}), std::invalid_argument);
  EXPECT_THROW(write_tensor_file(p, DType::Float64, {{"w", -1, 1, d}}, {}), std::invalid_argument);
  const std::string missing_dir = path("no/such/dir/x.hddp");
  EXPECT_NE(load_error([&] { write_tensor_file(missing_dir, DType::Float64, {{"w", 1, 1, d}}, {}); }).find("cannot create"),
            std::string::npos);
}

TEST_F(Serialize, TruncatedRefused) {
  Trained a(2);
  const std::string p = path("t.hddp"), q = path("cut.hddp");
  save_state(p, a.model.arena(), &a.adam);
  const std::string bytes = slurp(p);
  Trained b(1);
  const auto before = snapshot(b.model);
  const auto m_before = b.adam.exp_avg();
  for (size_t cut : {size_t(0), size_t(3), size_t(20), size_t(39), bytes.size() / 2, bytes.size() - 8, bytes.size() - 1}) {
    spit(q, bytes.substr(0, cut));
    const std::string e = load_error([&] { load_state(q, b.model.arena(), &b.adam); });
    const bool named = e.find("truncated") != std::string::npos || (cut < 4 && e.find("not an hddp") != std::string::npos);
    EXPECT_TRUE(named) << "cut at " << cut << ": " << e;
    EXPECT_NE(e.find(q), std::string::npos) << e;  // names the file
    EXPECT_EQ(snapshot(b.model), before);
    EXPECT_EQ(b.adam.exp_avg(), m_before);
    EXPECT_EQ(b.adam.steps(), 1);
  }
  spit(q, bytes + "xx");
  EXPECT_NE(load_error([&] { load_state(q, b.model.arena(), &b.adam); }).find("2 unexpected bytes"), std::string::npos);
}

TEST_F(Serialize, AnyFlippedByteRefused) {
  Trained a(2);
  const std::string p = path("f.hddp"), q = path("flip.hddp");
  save_state(p, a.model.arena(), &a.adam, {{"epoch", encode_u64s({3})}});
  const std::string bytes = slurp(p);
  Trained b(1);
  const auto before = snapshot(b.model);
  // A payload byte (the last parameter tensor's data, before the checksum): checksum message.
  {
    std::string bad = bytes;
    bad[bad.size() - 20] ^= 0x10;
    spit(q, bad);
    const std::string e = load_error([&] { load_state(q, b.model.arena(), &b.adam); });
    EXPECT_NE(e.find("checksum mismatch"), std::string::npos) << e;
    EXPECT_NE(e.find(q), std::string::npos) << e;
  }
  // Every byte of the file, one at a time.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x01;
    spit(q, bad);
    const std::string e = load_error([&] { load_state(q, b.model.arena(), &b.adam); });
    ASSERT_NE(e, "no error") << "flipping byte " << i << " was not detected";
    ASSERT_EQ(e.find("unexpected exception"), std::string::npos) << e;
    ASSERT_EQ(snapshot(b.model), before) << "byte " << i;
    ASSERT_EQ(b.adam.steps(), 1) << "byte " << i;
  }
}

TEST_F(Serialize, WrongVersionAndMagicRefused) {
  Trained a(1), b(2);
  const std::string p = path("v.hddp"), q = path("v2.hddp");
  save_state(p, a.model.arena(), &a.adam);
  std::string bytes = slurp(p);
  const auto before = snapshot(b.model);

  std::string v2 = bytes;
  const uint32_t two = 2;
  std::memcpy(v2.data() + 4, &two, 4);
  spit(q, reseal(v2));  // valid checksum: only the version is wrong
  std::string e = load_error([&] { load_state(q, b.model.arena(), &b.adam); });
  EXPECT_NE(e.find("format version 2; this build reads version 1"), std::string::npos) << e;
  EXPECT_EQ(snapshot(b.model), before);

  std::string magic = bytes;
  magic[0] = 'X';
  spit(q, reseal(magic));
  e = load_error([&] { load_state(q, b.model.arena(), &b.adam); });
  EXPECT_NE(e.find("is not an hddp tensor file"), std::string::npos) << e;

  std::string flags = bytes;
  flags[28] = 1;
  spit(q, reseal(flags));
  e = load_error([&] { load_state(q, b.model.arena(), &b.adam); });
  EXPECT_NE(e.find("flags"), std::string::npos) << e;
  EXPECT_EQ(snapshot(b.model), before);

  e = load_error([&] { load_state(path("absent.hddp"), b.model.arena(), &b.adam); });
  EXPECT_NE(e.find("cannot open"), std::string::npos) << e;
}

TEST_F(Serialize, OtherModelOrOptimizerRefused) {
  Trained a(2);
  const std::string p = path("m.hddp");
  save_state(p, a.model.arena(), &a.adam);

  // Another width: shapes differ.
  Rng r(1);
  Sequential<float> wider({Linear(2, 7), Tanh(), Linear(7, 1)}, 8, r);
  Adam<float> wider_adam(wider.num_params(), {});
  const auto before = snapshot(wider);
  std::string e = load_error([&] { load_state(p, wider.arena(), &wider_adam); });
  EXPECT_NE(e.find("parameter '0.weight' is 6x2 in the file but 7x2 in the model"), std::string::npos) << e;
  EXPECT_EQ(snapshot(wider), before);

  // A model without the last bias: the file has a parameter the model lacks.
  Sequential<float> nobias({Linear(2, 6), Tanh(), Linear(6, 1, false)}, 8, r);
  Adam<float> nobias_adam(nobias.num_params(), {});
  e = load_error([&] { load_state(p, nobias.arena(), &nobias_adam); });
  EXPECT_NE(e.find("the file has parameter '2.bias' that the model lacks"), std::string::npos) << e;

  // Other dtype.
  Sequential<double> dbl({Linear(2, 6), Tanh(), Linear(6, 1)}, 8);
  e = load_error([&] { load_state<double>(p, dbl.arena()); });
  EXPECT_NE(e.find("it holds float32 values, the model is float64"), std::string::npos) << e;

  // Other optimizer kind; no optimizer state in the file.
  Trained b(1);
  SGD<float> sgd(b.model.num_params(), SgdHyper{.lr = 0.1, .momentum = 0.9});
  const auto b_before = snapshot(b.model);
  e = load_error([&] { load_state(p, b.model.arena(), &sgd); });
  EXPECT_NE(e.find("the file has adam optimizer state, the optimizer is sgd"), std::string::npos) << e;
  EXPECT_EQ(snapshot(b.model), b_before);
  const std::string params_only = path("p.hddp");
  save_state<float>(params_only, a.model.arena());
  e = load_error([&] { load_state(params_only, b.model.arena(), &b.adam); });
  EXPECT_NE(e.find("no optimizer state"), std::string::npos) << e;
  EXPECT_EQ(snapshot(b.model), b_before);

  // SGD with and without momentum keep different state.
  save_state(params_only, b.model.arena(), &sgd);
  SGD<float> plain(b.model.num_params(), SgdHyper{.lr = 0.1});
  e = load_error([&] { load_state(params_only, b.model.arena(), &plain); });
  EXPECT_NE(e.find("1 optimizer state buffers, the optimizer 0"), std::string::npos) << e;

  // Reserved metadata keys.
  EXPECT_THROW(save_state(p, a.model.arena(), &a.adam, {{"hddp.mine", "x"}}), std::invalid_argument);
}

}  // namespace
