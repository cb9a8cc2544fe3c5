// The shared helpers (core/util.h): median, FNV-1a 64 against the reference vectors, the atomic
// write and whole-file read, file_exists, seconds_since, split.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>
#include "tests/common/testing.h"

using namespace hddp;

namespace {

class Util : public hddp::testing_util::TempDirTest {};

TEST(UtilMedian, OddEvenEmptyAndUnsorted) {
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_EQ(median({5}), 5.0);
  EXPECT_EQ(median({3, 1, 2}), 2.0);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({1, 1e9, -1e9, 7, 7}), 7.0);
}

TEST(UtilFnv, ReferenceVectors) {
  // FNV-1a 64 test vectors (Fowler/Noll/Vo reference: "" and "a", "foobar").
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
  EXPECT_EQ(fnv1a64("bar", 3, fnv1a64("foo", 3)), fnv1a64("foobar", 6)) << "continues from h";
}

TEST_F(Util, AtomicWriteReplacesAndLeavesNoTemporary) {
  const std::string p = path("f.bin");
  const std::string bytes("a\0b\nc", 5);
  write_file_atomic(p, bytes);
  EXPECT_EQ(read_file(p), bytes);
  write_file_atomic(p, "second");
  EXPECT_EQ(read_file(p), "second");
  write_file_atomic(p, "");
  EXPECT_EQ(read_file(p), "");
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "f.bin");
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(Util, ErrorsNameThePath) {
  try {
    read_file(path("absent"));
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent"), std::string::npos) << e.what();
  }
  try {
    write_file_atomic(path("no/such/dir/f"), "x");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no/such/dir/f"), std::string::npos) << e.what();
  }
}

TEST_F(Util, FileExists) {
  EXPECT_FALSE(file_exists(path("absent")));
  EXPECT_FALSE(file_exists(""));
  write_file_atomic(path("f"), "");
  EXPECT_TRUE(file_exists(path("f")));
  EXPECT_TRUE(file_exists(dir_.string())) << "a directory exists too";
}

TEST(UtilSecondsSince, CountsFromT0) {
  const auto now = std::chrono::steady_clock::now();
  const double s = seconds_since(now);
  EXPECT_GE(s, 0.0);
  EXPECT_LT(s, 60.0);
  const double two = seconds_since(now - std::chrono::seconds(2));
  EXPECT_GE(two, 2.0);
  EXPECT_LT(two, 62.0);
}

using Fields = std::vector<std::string>;

TEST(UtilSplit, SizesZeroOneAndMore) {
  EXPECT_EQ(split("", ','), Fields{}) << "an empty string: no fields";
  EXPECT_EQ(split("a", ','), Fields{"a"});
  EXPECT_EQ(split("a,b,c", ','), (Fields{"a", "b", "c"}));
  EXPECT_EQ(split("1x2x3", 'x'), (Fields{"1", "2", "3"}));
  EXPECT_EQ(split("a b", ','), Fields{"a b"}) << "no separator: the whole string";
}

TEST(UtilSplit, EmptyFieldsKept) {
  EXPECT_EQ(split(",", ','), (Fields{"", ""}));
  EXPECT_EQ(split("a,,b", ','), (Fields{"a", "", "b"}));
  EXPECT_EQ(split(",a,", ','), (Fields{"", "a", ""}));
  EXPECT_EQ(split("a,", ','), (Fields{"a", ""}));
  EXPECT_EQ(split(",,,", ','), (Fields{"", "", "", ""}));
}

// The same fields as std::getline plus a trailing empty field after a final separator (the
// splitter the earlier scaling study had), on every string of up to 4 characters over {a, ','}.
TEST(UtilSplit, SameAsGetlineSplitter) {
  auto getline_split = [](const std::string& s, char sep) {
    Fields v;
    std::string item;
    std::istringstream in(s);
    while (std::getline(in, item, sep)) v.push_back(item);
    if (!s.empty() && s.back() == sep) v.push_back("");
    return v;
  };
  for (int n = 0; n <= 4; ++n)
    for (int bits = 0; bits < (1 << n); ++bits) {
      std::string s;
      for (int i = 0; i < n; ++i) s += (bits >> i) & 1 ? ',' : 'a';
      EXPECT_EQ(split(s, ','), getline_split(s, ',')) << "'" << s << "'";
    }
}

TEST_F(Util, ReadingADirectoryIsAnError) {
  try {
    read_file(dir_.string());
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
}

}  // namespace
