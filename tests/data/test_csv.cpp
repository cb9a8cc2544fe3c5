// CSV through libcsv: good files (quoted names, CRLF, a BOM, spaces, blank lines, no final line
// end, other delimiters, chosen and skipped columns, labels), and every refusal with its
// message: the file, the line and column. Files go to a scratch folder in the test's working
// directory (the build tree), removed at the end.
#include <gtest/gtest.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/data/csv.h>
#include <hddp/kernels/check.h>

using namespace hddp;

namespace {

using F = std::vector<float>;
using S = std::vector<std::string>;

class Csv : public ::testing::Test {
 protected:
  const std::filesystem::path dir = std::filesystem::current_path() / "scratch-csv";
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (dir / name).string();
    write_file_atomic(p, text);
    return p;
  }
  // The message of the hddp::Error that reading `text` throws ("" if none); it must name the file.
  std::string error_of(const std::string& text, const CsvOptions& o = {}) const {
    const std::string p = write("bad.csv", text);
    try {
      read_csv(p, o);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(p), std::string::npos) << "the message does not name the file: " << m;
      return m;
    }
    return "";
  }
};

#define EXPECT_HAS(msg, want) EXPECT_NE((msg).find(want), std::string::npos) << "want '" << (want) << "', got '" << (msg) << "'"

TEST_F(Csv, QuotesCrlfBomSpacesBlankLinesNoFinalNewline) {
  const std::string p = write("a.csv", "\xEF\xBB\xBF\"a\",\"b, \"\"c\"\"\",price\r\n"
                                       " 1.5 , -2 ,3e2\r\n"
                                       "\r\n"
                                       "\"4\",+5,\" .25 \"");
  const Dataset d = read_csv(p, {.targets = {"price"}});
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.shape, (Shape{2}));
  EXPECT_EQ(d.feature_names, (S{"a", "b, \"c\""}));
  EXPECT_EQ(d.target_names, (S{"price"}));
  EXPECT_EQ(d.x, (F{1.5f, -2, 4, 5}));
  EXPECT_EQ(d.target_width, 1);
  EXPECT_EQ(d.y, (F{300, 0.25f}));
  EXPECT_TRUE(d.x_bytes.empty());
  EXPECT_TRUE(d.labels.empty());
  check(d, "a.csv");
}

TEST_F(Csv, NumbersRoundLikeNumpyFloat32) {
  // Read as double, then rounded to float: 0.1 -> 0.1f; a denormal stays.
  const Dataset d = read_csv(write("n.csv", "x\n0.1\n-0\n1e-40\n3.4028234e38\n"));
  EXPECT_EQ(d.x, (F{0.1f, -0.0f, float(1e-40), 3.4028234e38f}));
  EXPECT_EQ(d.target_width, 0);
  EXPECT_TRUE(d.y.empty());
}

TEST_F(Csv, ChosenFeaturesSkipOtherColumns) {
  // "name" is text, but neither a feature nor a target: not read. A quoted newline in it.
  const std::string p = write("c.csv", "id,name,f1,f2,t1,t2\n1,\"x\ny\",2,3,4,5\n6,bob,7,8,9,10\n");
  const Dataset d = read_csv(p, {.targets = {"t2", "t1"}, .features = {"f2", "f1", "id"}});
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ(d.shape, (Shape{3}));
  EXPECT_EQ(d.x, (F{3, 2, 1, 8, 7, 6}));
  EXPECT_EQ(d.target_width, 2);
  EXPECT_EQ(d.y, (F{5, 4, 10, 9}));
  EXPECT_EQ(d.feature_names, (S{"f2", "f1", "id"}));
  EXPECT_EQ(d.target_names, (S{"t2", "t1"}));
}

TEST_F(Csv, QuotedNewlineInAName) {
  const Dataset d = read_csv(write("q.csv", "\"x\ny\",t\n1,2\n"), {.targets = {"t"}});
  EXPECT_EQ(d.feature_names, (S{"x\ny"}));
  EXPECT_EQ(d.x, (F{1}));
  EXPECT_EQ(d.y, (F{2}));
}

TEST_F(Csv, Labels) {
  const Dataset d = read_csv(write("l.csv", "f,label,g\n0.5,2,1\n1,0,1\n2,+1,1\n3, 4 ,1\n"),
                             {.targets = {"label"}, .labels = true});
  EXPECT_EQ(d.count, 4);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{2, 0, 1, 4}));
  EXPECT_EQ(d.num_classes, 5);
  EXPECT_EQ(d.target_width, 0);
  EXPECT_TRUE(d.y.empty());
  EXPECT_EQ(d.feature_names, (S{"f", "g"}));
  EXPECT_EQ(d.x, (F{0.5f, 1, 1, 1, 2, 1, 3, 1}));
  check(d, "l.csv");
  std::vector<float> x(2);
  int32_t l = -1;
  const int64_t i = 3;
  d.gather(&i, 1, x.data(), &l);
  EXPECT_EQ(l, 4);
  EXPECT_EQ(x, (F{3, 1}));
}

TEST_F(Csv, OtherDelimiters) {
  const Dataset s = read_csv(write("s.csv", "a;\"b;c\"\n1.5;2\n"), {.delimiter = ';'});
  EXPECT_EQ(s.feature_names, (S{"a", "b;c"}));
  EXPECT_EQ(s.x, (F{1.5f, 2}));
  const Dataset t = read_csv(write("t.tsv", "a\tb\tc\n 1 \t2\t 3\n"), {.targets = {"c"}, .delimiter = '\t'});
  EXPECT_EQ(t.x, (F{1, 2}));
  EXPECT_EQ(t.y, (F{3}));
}

TEST_F(Csv, OneRowOneColumnAndOddSizes) {
  const Dataset one = read_csv(write("1.csv", "x\n7"));
  EXPECT_EQ(one.count, 1);
  EXPECT_EQ(one.x, (F{7}));
  std::string text = "a,b,c\n";
  for (int r = 0; r < 7; ++r) text += std::to_string(r) + "," + std::to_string(r * 2) + "," + std::to_string(r * 3) + "\n";
  const Dataset odd = read_csv(write("7.csv", text), {.targets = {"b"}});
  EXPECT_EQ(odd.count, 7);
  EXPECT_EQ(odd.x[12], 6);
  EXPECT_EQ(odd.x[13], 18);
  EXPECT_EQ(odd.y[6], 12);
}

TEST_F(Csv, FileAndHeaderErrors) {
  const std::string missing = (dir / "missing.csv").string();
  try {
    read_csv(missing);
    ADD_FAILURE() << "no throw";
  } catch (const Error& e) {
    EXPECT_HAS(std::string(e.what()), "cannot open '" + missing + "': No such file");
  }
  EXPECT_HAS(error_of(""), "no data rows (an empty file)");
  EXPECT_HAS(error_of("\xEF\xBB\xBF\r\n\n"), "no data rows (an empty file)");
  EXPECT_HAS(error_of("a,b\r\n"), "no data rows (only the header)");
  EXPECT_HAS(error_of("a,b"), "no data rows (only the header)");
  EXPECT_HAS(error_of("a,b\n1,2\n", {.targets = {"z"}}), "no column 'z' (target); the columns are 'a', 'b'");
  EXPECT_HAS(error_of("a,b\n1,2\n", {.features = {"a", "q"}}), "no column 'q' (feature); the columns are 'a', 'b'");
  EXPECT_HAS(error_of("a,b,a\n1,2,3\n"), "duplicate column name 'a' (columns 1 and 3)");
  EXPECT_HAS(error_of("a,b\n1,2\n", {.targets = {"a", "b"}}), "no feature columns");
}

TEST_F(Csv, RowErrorsNameTheLineAndColumn) {
  EXPECT_HAS(error_of("a,b,c,d,e,f\n1,2,3,4,5,6\n1,2,3,4,5\n"), ": line 3: 5 fields, the header has 6");
  EXPECT_HAS(error_of("a,b\n1,2,3\n"), ": line 2: 3 fields, the header has 2");
  EXPECT_HAS(error_of("a,b\n1,2\n7\n"), ": line 3: 1 field, the header has 2");
  EXPECT_HAS(error_of("a,b\n1,\n"), ": line 2, column 2 ('b'): empty cell");
  EXPECT_HAS(error_of("a,b\n1,\"  \"\n"), ": line 2, column 2 ('b'): empty cell");
  EXPECT_HAS(error_of("a,b,price\n1,2,3\n4,5,abc\n"), ": line 3, column 3 ('price'): 'abc' is not a number");
  EXPECT_HAS(error_of("a,b\n1,2x\n"), "'2x' is not a number");
  EXPECT_HAS(error_of("a,b\n1,1,5\n", {.delimiter = ';'}), "line 2, column 1 ('a,b'): '1,1,5' is not a number");
  EXPECT_HAS(error_of("a\nnan\n"), "'nan' is not a number");
  EXPECT_HAS(error_of("a\n-inf\n"), "'-inf' is not a number");
  EXPECT_HAS(error_of("a\n0x10\n"), "'0x10' is not a number");
  EXPECT_HAS(error_of("a\n+-1\n"), "'+-1' is not a number");
  EXPECT_HAS(error_of("a\n1e39\n"), "'1e39' is out of range for float");
  EXPECT_HAS(error_of("a\n1e400\n"), "'1e400' is out of range");
  // Lines count the header, blank lines, CRLF as one, and the lines of a quoted cell.
  EXPECT_HAS(error_of("a\r\n1\r\n\r\nx\r\n"), ": line 4, column 1 ('a'): 'x' is not a number");
  EXPECT_HAS(error_of("a\r1\rx\r"), ": line 3, column 1 ('a'): 'x' is not a number");  // old Mac line ends
  EXPECT_HAS(error_of("note,v\n\"multi\nline\",1\nok,abc\n", {.features = {"v"}}), ": line 4, column 2 ('v'): 'abc'");
  EXPECT_HAS(error_of("note,v\n\"multi\r\nline\",abc\n", {.features = {"v"}}), ": line 2, column 2 ('v'): 'abc'");
}

TEST_F(Csv, LabelErrors) {
  const CsvOptions o{.targets = {"y"}, .labels = true};
  for (const char* bad : {"2.5", "-1", "abc", "1e3", "99999999999"})
    EXPECT_HAS(error_of(std::string("x,y\n1,0\n2,") + bad + "\n", o),
               std::string(": line 3, column 2 ('y'): label '") + bad + "' is not an integer >= 0");
  EXPECT_HAS(error_of("x,y\n1,\n", o), ": line 2, column 2 ('y'): empty cell");
}

TEST_F(Csv, MalformedQuotes) {
  EXPECT_HAS(error_of("a,b\n1,2\n3,4\"5\n"), ": line 3: malformed CSV");
  EXPECT_HAS(error_of("a,b\n1,\"2\"x\n"), ": line 2: malformed CSV");
  EXPECT_HAS(error_of("a,b\n1,2\n3,\"4\n\n"), ": line 3: a quoted field is never closed");
  EXPECT_HAS(error_of("a,b\n1,2\n\"3"), ": line 3: a quoted field is never closed");
}

TEST_F(Csv, InconsistentOptions) {
  const std::string p = write("o.csv", "a,b,c\n1,2,3\n");
  EXPECT_THROW(read_csv(p, {.targets = {"a", "b"}, .labels = true}), std::invalid_argument);
  EXPECT_THROW(read_csv(p, {.labels = true}), std::invalid_argument);
  EXPECT_THROW(read_csv(p, {.targets = {"a"}, .features = {"a", "b"}}), std::invalid_argument);
  EXPECT_THROW(read_csv(p, {.features = {"b", "b"}}), std::invalid_argument);
  EXPECT_THROW(read_csv(p, {.delimiter = '"'}), std::invalid_argument);
  EXPECT_EQ(read_csv(p, {.targets = {"a"}, .features = {"b"}}).x, (F{2}));
}

}  // namespace
