// IDX files: a round trip of generated arrays (plain and gzip'd through zlib), every malformed
// case named in the message, and the Dataset of an images file and a labels file (MNIST's
// layout: read_idx_dataset, read_mnist). Files go to a scratch folder in the test's working
// directory (the build tree), removed at the end.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/data/idx.h>
#include <hddp/kernels/check.h>

using namespace hddp;

namespace {

// An IDX file of unsigned bytes: header for dims, then `data` (which may disagree, for tests).
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data, uint8_t type = 0x08) {
  std::string s = {'\0', '\0', char(type), char(dims.size())};
  for (uint32_t d : dims)
    for (int sh : {24, 16, 8, 0}) s.push_back(char((d >> sh) & 0xff));
  s.append(data.begin(), data.end());
  return s;
}

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 7 + 3);
  return v;
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
  ASSERT_EQ(gzclose(f), Z_OK);
}

// The message of the hddp::Error that f throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class Idx : public ::testing::Test {
 protected:
  const std::filesystem::path dir = std::filesystem::current_path() / "scratch-idx";
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string path(const char* name) const { return (dir / name).string(); }
};

TEST_F(Idx, RoundTripPlainAndGzip) {
  const std::vector<uint8_t> images = iota_bytes(3 * 4 * 5), labels = {1, 9, 0};
  write_file_atomic(path("images"), idx_bytes({3, 4, 5}, images));
  write_gzip(path("labels.gz"), idx_bytes({3}, labels));
  const IdxArray a = read_idx(path("images")), l = read_idx(path("labels.gz"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(a.data, std::string(images.begin(), images.end()));
  EXPECT_EQ(l.dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(l.data, std::string(labels.begin(), labels.end()));
}

TEST_F(Idx, MalformedArraysAreNamed) {
  const auto data = iota_bytes(12);
  const struct {
    std::string bytes, want;
  } cases[] = {
      {std::string("\0\0", 2), "shorter than the 4-byte header"},
      {"PK\x03\x04" + std::string(20, 'x'), "bad magic"},
      {idx_bytes({12}, data, 0x0D), "is not unsigned byte"},
      {idx_bytes({}, {}), "0 dimensions"},
      {idx_bytes({1, 1, 1, 1, 1}, {1}), "5 dimensions"},
      {idx_bytes({3, 4}, data).substr(0, 9), "truncated header"},
      {idx_bytes({3, 0}, {}), "dimension 1 is zero"},
      {idx_bytes({3, 4}, iota_bytes(11)), "truncated: the dimensions need 12 bytes of data, the file has 11"},
      {idx_bytes({3, 4}, iota_bytes(13)), "1 bytes after the 12"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of([&] { parse_idx(c.bytes, "f.idx"); });
    EXPECT_NE(msg.find(c.want), std::string::npos) << "want '" << c.want << "', got '" << msg << "'";
    EXPECT_NE(msg.find("f.idx"), std::string::npos) << msg;
  }
}

TEST_F(Idx, BadFilesAreNamed) {
  EXPECT_NE(error_of([&] { read_idx(path("missing.gz")); }).find("No such file"), std::string::npos);
  EXPECT_NE(error_of([&] { read_idx(dir.string()); }).find("not a regular file"), std::string::npos);
  // A gzip stream cut in half (inside the data, then inside its trailer), one with its deflate
  // data damaged.
  std::vector<uint8_t> noise(4000);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = uint8_t((i * 2654435761u) >> 13);
  write_gzip(path("whole.gz"), idx_bytes({40, 100}, noise));
  std::string gz = read_file(path("whole.gz"));
  write_file_atomic(path("cut.gz"), gz.substr(0, gz.size() / 2));
  EXPECT_NE(error_of([&] { read_idx(path("cut.gz")); }).find("truncated or corrupt gzip"), std::string::npos);
  write_file_atomic(path("cut-trailer.gz"), gz.substr(0, gz.size() - 3));
  EXPECT_NE(error_of([&] { read_idx(path("cut-trailer.gz")); }).find("truncated or corrupt gzip"), std::string::npos);
  EXPECT_EQ(read_idx(path("whole.gz")).data.size(), 4000u);
  for (size_t i = 12; i < gz.size() - 8; ++i) gz[i] = char(gz[i] ^ 0x5a);
  write_file_atomic(path("bad.gz"), gz);
  EXPECT_NE(error_of([&] { read_idx(path("bad.gz")); }).find("gzip"), std::string::npos);
}

TEST_F(Idx, DatasetOfImagesAndLabels) {
  const std::vector<uint8_t> images = iota_bytes(5 * 2 * 3), labels = {3, 0, 7, 1, 3};
  write_file_atomic(path("im"), idx_bytes({5, 2, 3}, images));
  write_gzip(path("lb.gz"), idx_bytes({5}, labels));
  const Dataset d = read_idx_dataset(path("im"), path("lb.gz"));
  EXPECT_EQ(d.count, 5);
  EXPECT_EQ(d.shape, (Shape{1, 2, 3}));
  EXPECT_EQ(d.features(), 6);
  EXPECT_EQ(d.x_bytes, std::string(images.begin(), images.end()));
  EXPECT_TRUE(d.x.empty());
  EXPECT_EQ(d.labels, (std::vector<int32_t>{3, 0, 7, 1, 3}));
  EXPECT_EQ(d.num_classes, 8);
  check(d, "idx");
  std::vector<float> x(6);
  int32_t l = -1;
  const int64_t i = 2;
  d.gather(&i, 1, x.data(), &l);
  EXPECT_EQ(l, 7);
  EXPECT_EQ(x[0], float(images[12]) * (1.0f / 255.0f));

  write_file_atomic(path("flat"), idx_bytes({5, 6}, images));
  write_file_atomic(path("lb4"), idx_bytes({4}, {1, 2, 3, 4}));
  write_file_atomic(path("lb2d"), idx_bytes({5, 1}, {1, 2, 3, 4, 5}));
  EXPECT_NE(error_of([&] { read_idx_dataset(path("flat"), path("lb.gz")); })
                .find(path("flat") + ": images must have 3 dimensions (count, rows, columns), this file has 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_idx_dataset(path("im"), path("lb4")); }).find(path("lb4") + ": 4 labels for the 5 images of " + path("im")),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_idx_dataset(path("im"), path("lb2d")); }).find("labels must have 1 dimension, this file has 2"),
            std::string::npos);
}

TEST_F(Idx, MnistSplits) {
  // train: gzip'd (chosen over a plain file of the same name), 3 images; t10k: plain, 1 image.
  write_gzip(path("train-images-idx3-ubyte.gz"), idx_bytes({3, 2, 2}, iota_bytes(12)));
  write_file_atomic(path("train-images-idx3-ubyte"), "not read");
  write_gzip(path("train-labels-idx1-ubyte.gz"), idx_bytes({3}, {9, 0, 4}));
  write_file_atomic(path("t10k-images-idx3-ubyte"), idx_bytes({1, 2, 2}, {1, 2, 3, 4}));
  write_file_atomic(path("t10k-labels-idx1-ubyte"), idx_bytes({1}, {2}));
  const Dataset tr = read_mnist(dir.string(), "train"), te = read_mnist(dir.string(), "test");
  EXPECT_EQ(tr.count, 3);
  EXPECT_EQ(tr.shape, (Shape{1, 2, 2}));
  EXPECT_EQ(tr.labels, (std::vector<int32_t>{9, 0, 4}));
  EXPECT_EQ(tr.num_classes, 10);
  EXPECT_EQ(te.count, 1);
  EXPECT_EQ(te.x_bytes, std::string("\x01\x02\x03\x04"));
  EXPECT_EQ(te.labels, (std::vector<int32_t>{2}));
  EXPECT_EQ(te.num_classes, 10);  // MNIST's, not max + 1

  EXPECT_THROW(read_mnist(dir.string(), "valid"), std::invalid_argument);
  EXPECT_NE(error_of([&] { read_mnist(path("nowhere"), "train"); }).find("apt-get install dataset-fashion-mnist"),
            std::string::npos);
  std::filesystem::remove(path("t10k-labels-idx1-ubyte"));
  EXPECT_NE(error_of([&] { read_mnist(dir.string(), "test"); })
                .find("no 't10k-labels-idx1-ubyte.gz' or 't10k-labels-idx1-ubyte' in '" + dir.string() + "'"),
            std::string::npos);
  write_file_atomic(path("t10k-labels-idx1-ubyte"), idx_bytes({1}, {12}));
  EXPECT_NE(error_of([&] { read_mnist(dir.string(), "test"); })
                .find(path("t10k-labels-idx1-ubyte") + ": label 12 of image 0 is outside [0, 10)"),
            std::string::npos);
}

}  // namespace

// Sizes from the file are checked before they are trusted: dimensions whose product wraps 64
// bits, a header that claims more than its file holds, a gzip bomb, a gzip trailer that lies.
TEST_F(Idx, HostileSizesAreRefusedBeforeAnyAllocation) {
  // (2^16, 2^24, 2^24): 2^64 wraps to 0 when multiplied unchecked.
  const std::string wrap = idx_bytes({1u << 16, 1u << 24, 1u << 24}, {});
  EXPECT_NE(error_of([&] { parse_idx(wrap, "wrap.idx"); }).find("wrap.idx: dimensions (65536, 16777216, 16777216)"),
            std::string::npos)
      << error_of([&] { parse_idx(wrap, "wrap.idx"); });
  write_file_atomic(path("wrap.idx"), wrap);
  EXPECT_NE(error_of([&] { read_idx(path("wrap.idx")); }).find("overflows"), std::string::npos);
  // 2^32 - 1 images of one byte announced by a 10-byte plain file: refused from its size.
  write_file_atomic(path("claims.idx"), idx_bytes({0xffffffffu}, {1, 2}));
  EXPECT_NE(error_of([&] { read_idx(path("claims.idx")); }).find("truncated: the dimensions need 4294967295 bytes of data, "
                                                                  "the file has 2"), std::string::npos);
  // The same header gzip'd: a file of a few dozen bytes cannot inflate to 4 GiB.
  write_gzip(path("claims.gz"), idx_bytes({0xffffffffu}, {1, 2}));
  EXPECT_NE(error_of([&] { read_idx(path("claims.gz")); }).find("more than a gzip file of"), std::string::npos);
  // An 18-byte gzip (an empty stream) whose trailer claims 4 GiB - 1: nothing reserved from it.
  std::string tiny = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 0, 0, 0, '\xff', '\xff', '\xff', '\xff'};
  write_file_atomic(path("liar.gz"), tiny);
  EXPECT_NE(error_of([&] { read_idx(path("liar.gz")); }).find("liar.gz"), std::string::npos);
  EXPECT_NE(error_of([&] { read_maybe_gzip(path("liar.gz"), 1 << 20); }).find("liar.gz"), std::string::npos);
  // A gzip bomb: a valid 8-byte header of 10 bytes of data, then 64 MiB of zeros (about 64 KiB
  // compressed). Refused after the 11th byte of data, without inflating the rest.
  {
    gzFile f = gzopen(path("bomb.gz").c_str(), "wb9");
    ASSERT_TRUE(f);
    const std::string head = idx_bytes({10}, iota_bytes(10));
    ASSERT_EQ(gzwrite(f, head.data(), unsigned(head.size())), int(head.size()));
    const std::string zeros(1 << 20, '\0');
    for (int i = 0; i < 64; ++i) ASSERT_EQ(gzwrite(f, zeros.data(), unsigned(zeros.size())), int(zeros.size()));
    ASSERT_EQ(gzclose(f), Z_OK);
  }
  EXPECT_NE(error_of([&] { read_idx(path("bomb.gz")); }).find("data after the 10 bytes the dimensions describe"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_maybe_gzip(path("bomb.gz"), 1 << 20); }).find("more than 1048576 bytes once decompressed"),
            std::string::npos);
  EXPECT_EQ(read_maybe_gzip(path("bomb.gz"), uint64_t(1) << 27).size(), (size_t(64) << 20) + 8 + 10);
}
