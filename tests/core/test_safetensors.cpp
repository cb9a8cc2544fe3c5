// safetensors (core/safetensors.h): encode/parse round trip, the header as the format defines
// it, every malformed file refused with a message naming the problem, load_weights all or
// nothing, and a mutation fuzz: any bytes give a file or an hddp::Error, nothing else.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <hddp/core/model.h>
#include <hddp/core/rng.h>
#include <hddp/core/safetensors.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>
#include "tests/common/testing.h"

using namespace hddp;

namespace {

class Safetensors : public hddp::testing_util::TempDirTest {};

std::string f32s(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

SafeTensors sample() {
  SafeTensors st;
  st.tensors = {{"w", "F32", {2, 3}, f32s({1, 2, 3, 4, 5, 6})}, {"b", "F32", {2}, f32s({-1, 0.5f})},
                {"empty", "F32", {0, 4}, ""}};
  st.metadata = {{"format", "pt"}, {"note", "x"}};
  return st;
}

// The header of a file, and a file from a header and data.
std::string header_of(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return bytes.substr(8, n);
}
std::string file(const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_safetensors(bytes, "f.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SafetensorsFormat, RoundTripAndHeader) {
  const std::string bytes = encode_safetensors(sample());
  const std::string h = header_of(bytes);
  EXPECT_EQ((8 + h.size()) % 8, 0u) << "data starts 8-byte aligned";
  EXPECT_NE(h.find(R"("w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})"), std::string::npos) << h;
  EXPECT_NE(h.find(R"("__metadata__":{"format":"pt","note":"x"})"), std::string::npos) << h;
  const SafeTensors back = parse_safetensors(bytes, "f");
  ASSERT_EQ(back.tensors.size(), 3u);
  EXPECT_EQ(back.metadata, sample().metadata);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.tensors[i].name, sample().tensors[i].name);
    EXPECT_EQ(back.tensors[i].shape, sample().tensors[i].shape);
    EXPECT_EQ(back.tensors[i].data, sample().tensors[i].data);
  }
}

TEST(SafetensorsFormat, MalformedFilesNameTheProblem) {
  const std::string good = encode_safetensors(sample()), h = header_of(good), data = good.substr(8 + h.size());
  EXPECT_NE(error_of("abc").find("less than the 8-byte header length"), std::string::npos);
  EXPECT_NE(error_of(good.substr(0, good.size() - 1)).find("run past the data"), std::string::npos);
  EXPECT_NE(error_of(file(h, data + "zz")).find("bytes after the last tensor belong to no tensor"), std::string::npos);
  std::string past = good;
  const uint64_t huge = good.size();
  std::memcpy(past.data(), &huge, 8);
  EXPECT_NE(error_of(past).find("header length"), std::string::npos);
  EXPECT_NE(error_of(file("{not json", data)).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(file("[1,2]", "")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                          std::string(12, '\0'))).find("overlaps"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", std::string(8, '\0'))).find("belong to no tensor"),
            std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'))).find("unknown dtype 'Q7'"),
            std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0'))).find("needs 12"),
            std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", "")).find("non-negative"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'))).find("no \"dtype\""), std::string::npos);
  EXPECT_NE(error_of(file(R"({"__metadata__":{"k":1}})", "")).find("is not a string"), std::string::npos);
  // Nesting and dimensions are bounded before anything large is built (a header of 100 MiB
  // of '[' would take gigabytes in a JSON tree).
  EXPECT_NE(error_of(file(std::string(1 << 20, '['), "")).find("nests deeper"), std::string::npos);
  EXPECT_EQ(error_of(file(R"({"a":{"s":"[[[[[[","dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\0'))),
            "no error") << "brackets inside strings do not count";
  std::string dims = R"({"a":{"dtype":"F32","shape":[)";
  for (int i = 0; i < 17; ++i) dims += i ? ",1" : "1";
  EXPECT_NE(error_of(file(dims + R"(],"data_offsets":[0,4]}})", std::string(4, '\0'))).find("17 dimensions"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", "")).find("too large"),
            std::string::npos);
}

// A Sequential's weights: saved under PyTorch's names and shapes, loaded back exactly; any
// mismatch refused with the arena unchanged.
TEST_F(Safetensors, WeightsRoundTripAndMismatches) {
  Rng a(1), b(2);
  Sequential<float> m1({Linear(1, 20), Linear(20, 1, false), Tanh()}, 4, a), m2({Linear(1, 20), Linear(20, 1, false), Tanh()}, 4, b);
  const std::string p = path("w.safetensors");
  save_weights(p, m1.arena(), {{"format", "pt"}});
  const SafeTensors st = parse_safetensors(read_file(p), p);
  ASSERT_EQ(st.tensors.size(), 3u);
  EXPECT_EQ(st.tensors[0].name, "0.weight");
  EXPECT_EQ(st.tensors[0].shape, (std::vector<int64_t>{20, 1}));
  EXPECT_EQ(st.tensors[1].name, "0.bias");
  EXPECT_EQ(st.tensors[1].shape, (std::vector<int64_t>{20}));
  EXPECT_EQ(st.tensors[2].shape, (std::vector<int64_t>{1, 20}));
  load_weights(st, p, m2.arena());
  EXPECT_EQ(std::vector<float>(m2.params(), m2.params() + m2.num_params()),
            std::vector<float>(m1.params(), m1.params() + m1.num_params()));

  Rng c(3);
  Sequential<float> wide({Linear(1, 21), Linear(21, 1, false), Tanh()}, 4, c);
  auto refused = [&](Sequential<float>& model, const SafeTensors& s, const std::string& want) {
    const std::vector<float> before(model.params(), model.params() + model.num_params());
    try {
      load_weights(s, p, model.arena());
      ADD_FAILURE() << "accepted; expected: " << want;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    EXPECT_EQ(std::vector<float>(model.params(), model.params() + model.num_params()), before) << "changed on error";
  };
  refused(wide, st, "tensor '0.weight' has shape [20, 1], the model's is [21, 1]");
  Rng d(4);
  Sequential<float> fresh({Linear(1, 20), Linear(20, 1, false), Tanh()}, 4, d);
  SafeTensors f64 = st;
  f64.tensors[2].dtype = "F64", f64.tensors[2].data += f64.tensors[2].data;
  refused(fresh, f64, "tensor '1.weight' is F64");
  SafeTensors missing = st;
  missing.tensors.pop_back();
  refused(fresh, missing, "has no tensor '1.weight'");
  SafeTensors extra = st;
  extra.tensors.push_back({"2.weight", "F32", {1}, f32s({1})});
  refused(fresh, extra, "holds tensor '2.weight'");
}

// Mutations of a valid file (flipped bytes, cut, grown, header length changed): the reader and
// loader throw nothing but hddp::Error, and whatever parses has consistent sizes.
TEST(SafetensorsFormat, FuzzThrowsOnlyErrors) {
  Rng init(5);
  Sequential<float> m({Linear(1, 6), Tanh(), Linear(6, 1, false), Tanh()}, 4, init);
  SafeTensors st;
  st.metadata = {{"hddp.layers", "x"}};
  for (size_t i = 0; i < m.arena().num_tensors(); ++i) {
    const ParamView& v = m.arena().view(i);
    const std::vector<int64_t> shape = v.shape.empty() ? std::vector<int64_t>{v.rows, v.cols} : v.shape;  // PyTorch's
    st.tensors.push_back({v.name, "F32", shape, std::string(reinterpret_cast<const char*>(m.arena().param(i)), v.size() * 4)});
  }
  const std::string good = encode_safetensors(st);
  std::mt19937_64 gen(42);
  int parsed = 0, errors = 0;
  for (int it = 0; it < 20000; ++it) {
    std::string b = good;
    const int kind = int(gen() % 4), edits = 1 + int(gen() % 4);
    for (int e = 0; e < edits; ++e) {
      if (kind == 0 && !b.empty()) b[gen() % b.size()] = char(gen());
      if (kind == 1) b.resize(gen() % (b.size() + 1));
      if (kind == 2) b.insert(gen() % (b.size() + 1), 1, char(gen()));
      if (kind == 3) {
        const uint64_t n = gen() % (good.size() + 16);
        std::memcpy(b.data(), &n, 8);
      }
    }
    try {
      const SafeTensors s = parse_safetensors(b, "fuzz");
      for (const SafeTensor& t : s.tensors) ASSERT_LE(t.data.size(), b.size());
      load_weights(s, "fuzz", m.arena());
      ++parsed;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 10000);
  EXPECT_GT(parsed, 0) << "flips inside the data still parse";
}

}  // namespace
