// .npy: files built here byte by byte (each dtype, format versions 1.0, 2.0 and 3.0, the header
// syntax numpy may write, every refusal with its message), and files numpy itself wrote
// (tests/data/fixtures, from gen_npy_fixtures.py). Scratch files go to a folder in the test's
// working directory (the build tree), removed at the end.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/data/npy.h>
#include <hddp/kernels/check.h>

using namespace hddp;

namespace {

using F = std::vector<float>;
using Dims = std::vector<int64_t>;

// An .npy file: the magic, version major.0, the header length (2 or 4 bytes), `header` padded
// with spaces and '\n' to a multiple of 64 bytes as numpy does (pad = false: as given), data.
std::string npy(int major, const std::string& header, const std::string& data, bool pad = true) {
  const size_t prefix = major == 1 ? 10 : 12;
  const size_t spaces = (64 - (prefix + header.size() + 1) % 64) % 64;
  const std::string h = pad ? header + std::string(spaces, ' ') + "\n" : header;
  std::string s = "\x93NUMPY";
  s += char(major);
  s += '\0';
  for (size_t i = 0; i < prefix - 8; ++i) s += char((h.size() >> (8 * i)) & 0xff);
  return s + h + data;
}

std::string dict(const std::string& descr, const std::string& shape, const char* fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

template <class T>
std::string raw(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

class Npy : public ::testing::Test {
 protected:
  const std::filesystem::path dir = std::filesystem::current_path() / "scratch-npy";
  void SetUp() override { std::filesystem::create_directories(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = (dir / name).string();
    write_file_atomic(p, bytes);
    return p;
  }
  // The message of the hddp::Error that f throws ("" if none).
  template <class Fn>
  static std::string error_of(Fn&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  // read_npy of `bytes`' message; it must name the file.
  std::string npy_error(const std::string& bytes) const {
    const std::string p = write("bad.npy", bytes);
    const std::string m = error_of([&] { read_npy(p); });
    EXPECT_NE(m.find(p), std::string::npos) << "the message does not name the file: '" << m << "'";
    return m;
  }
};

#define EXPECT_HAS(msg, want) EXPECT_NE((msg).find(want), std::string::npos) << "want '" << (want) << "', got '" << (msg) << "'"

TEST_F(Npy, EachDtypeAndVersion) {
  const struct {
    const char* dtype;
    size_t item;
  } types[] = {{"<f4", 4}, {"<f8", 8}, {"|u1", 1}, {"<i4", 4}, {"<i8", 8}};
  for (int major : {1, 2, 3})
    for (const auto& t : types) {
      std::string data(2 * 3 * t.item, '\0');
      for (size_t i = 0; i < data.size(); ++i) data[i] = char(i * 11 + major);
      const NpyArray a = read_npy(write("a.npy", npy(major, dict(t.dtype, "(2, 3)"), data)));
      EXPECT_EQ(a.dtype, t.dtype) << major;
      EXPECT_EQ(a.shape, (Dims{2, 3})) << t.dtype << " v" << major;
      EXPECT_EQ(a.bytes, data) << t.dtype << " v" << major;
    }
}

TEST_F(Npy, HeaderSyntax) {
  const std::string four = raw(F{1, 2, 3, 4});
  const struct {
    std::string header;
    Dims shape;
  } cases[] = {
      {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (4,)}", {4}},          // double quotes, no final comma
      {"{'shape':(2,2),'fortran_order':False,'descr':'<f4'}", {2, 2}},                   // another order, no spaces
      {"{ 'descr' : '<f4' ,  'fortran_order' : False , 'shape' : ( 1 , 4 , ) , }", {1, 4}},  // spaces, trailing commas
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 2, 2), }", {1, 1, 2, 2}},
  };
  for (const auto& c : cases) {
    for (bool pad : {true, false}) {
      const NpyArray a = read_npy(write("h.npy", npy(1, c.header, four, pad)));
      EXPECT_EQ(a.shape, c.shape) << c.header;
      EXPECT_EQ(a.bytes, four) << c.header;
    }
  }
  // A scalar, and empty arrays.
  EXPECT_EQ(read_npy(write("s.npy", npy(1, dict("<f8", "()"), raw(std::vector<double>{2.5})))).shape, Dims{});
  EXPECT_EQ(read_npy(write("e.npy", npy(1, dict("<f4", "(0, 3)"), ""))).shape, (Dims{0, 3}));
  EXPECT_EQ(read_npy(write("z.npy", npy(2, dict("|u1", "(0,)"), ""))).shape, (Dims{0}));
}

TEST_F(Npy, BadFiles) {
  const std::string d6 = raw(F{1, 2, 3, 4, 5, 6});
  const std::string missing = (dir / "missing.npy").string();
  EXPECT_HAS(error_of([&] { read_npy(missing); }), "cannot open '" + missing + "': No such file");
  EXPECT_HAS(npy_error("PK\x03\x04 not numpy at all"), "not an .npy file: it does not start with the magic");
  EXPECT_HAS(npy_error("\x93NUMPY"), "not an .npy file");
  std::string v4 = npy(3, dict("<f4", "(6,)"), d6);
  v4[6] = 4;
  EXPECT_HAS(npy_error(v4), ".npy format version 4.0 is not supported (1.0, 2.0 and 3.0 are)");
  std::string v11 = npy(1, dict("<f4", "(6,)"), d6);
  v11[7] = 1;
  EXPECT_HAS(npy_error(v11), "version 1.1 is not supported");
  EXPECT_HAS(npy_error(npy(1, dict("<f4", "(6,)"), d6).substr(0, 40)), "truncated .npy header");
  EXPECT_HAS(npy_error(npy(2, dict("<f4", "(6,)"), d6).substr(0, 11)), "truncated .npy header");
}

TEST_F(Npy, MalformedHeaders) {
  const std::string d6 = raw(F{1, 2, 3, 4, 5, 6});
  const struct {
    std::string header, want;
  } cases[] = {
      {"'descr': '<f4'", "expected '{'"},
      {"{'descr': '<f4', 'fortran_order': False}", "no key 'shape'"},
      {"{'fortran_order': False, 'shape': (6,)}", "no key 'descr'"},
      {"{'descr': '<f4', 'shape': (6,)}", "no key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", "unexpected or repeated key 'extra'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", "unexpected or repeated key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", "'(n)' is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [6]}", "expected '('"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (6,)}", "expected True or False"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (6,)}", "expected '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", "expected '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", "text after the dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", "expected a dimension"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6L,)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "a dimension too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6 2)}", "expected ',' or ')'"},
      {"{'descr': \"<f4, 'fortran_order': False, 'shape': (6,)}", "an unterminated string"},
      {"{descr: '<f4', 'fortran_order': False, 'shape': (6,)}", "expected a string"},
  };
  for (const auto& c : cases) {
    const std::string m = npy_error(npy(1, c.header, d6));
    EXPECT_HAS(m, "malformed .npy header");
    EXPECT_HAS(m, c.want);
  }
}

TEST_F(Npy, RefusedArrays) {
  const std::string d6 = raw(F{1, 2, 3, 4, 5, 6});
  EXPECT_HAS(npy_error(npy(1, dict("<f4", "(2, 3)", "True"), d6)),
             "Fortran order is not supported: save with np.ascontiguousarray");
  EXPECT_HAS(npy_error(npy(1, dict(">f4", "(6,)"), d6)),
             "dtype '>f4' is not supported (big-endian: save with .astype('<f4'))");
  EXPECT_HAS(npy_error(npy(1, dict("<c8", "(3,)"), d6)), "dtype '<c8' is not supported; read are '<f4'");
  EXPECT_HAS(npy_error(npy(1, dict("<f2", "(12,)"), d6)), "dtype '<f2' is not supported");
  EXPECT_HAS(npy_error(npy(1, "{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (3,), }", d6)),
             "a structured dtype (a list of fields) is not supported");
  EXPECT_HAS(npy_error(npy(1, dict("<f8", "(4294967296, 4294967296)"), d6)),
             "shape (4294967296, 4294967296) of '<f8' overflows");
  EXPECT_HAS(npy_error(npy(1, dict("<f4", "(7,)"), d6)),
             "truncated: shape (7,) of '<f4' needs 28 bytes of data, the file has 24");
  EXPECT_HAS(npy_error(npy(3, dict("<f4", "(2, 2)"), d6)), "8 bytes after the 16 that shape (2, 2) of '<f4' describes");
}

TEST_F(Npy, DatasetFromFloatsAndLabels) {
  const std::string x = write("x.npy", npy(1, dict("<f8", "(3, 2)"), raw(std::vector<double>{0.5, 1, -2, 3, 4.25, 5})));
  const std::string l = write("l.npy", npy(1, dict("<i4", "(3,)"), raw(std::vector<int32_t>{2, 0, 6})));
  const Dataset d = read_npy_dataset(x, l, true);
  EXPECT_EQ(d.count, 3);
  EXPECT_EQ(d.shape, (Shape{2}));
  EXPECT_EQ(d.x, (F{0.5f, 1, -2, 3, 4.25f, 5}));
  EXPECT_EQ(d.labels, (std::vector<int32_t>{2, 0, 6}));
  EXPECT_EQ(d.num_classes, 7);
  check(d, "npy");
  // Regression targets (N, k) and (N,); X of shape (N,) is one feature per sample.
  const std::string y2 = write("y2.npy", npy(2, dict("<f4", "(3, 2)"), raw(F{1, 2, 3, 4, 5, 6})));
  const Dataset r = read_npy_dataset(x, y2, false);
  EXPECT_EQ(r.target_width, 2);
  EXPECT_EQ(r.y, (F{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(r.labels.empty());
  const std::string x1 = write("x1.npy", npy(1, dict("<f4", "(3,)"), raw(F{7, 8, 9})));
  const std::string y1 = write("y1.npy", npy(3, dict("<f8", "(3,)"), raw(std::vector<double>{0.25, -1, 2})));
  const Dataset s = read_npy_dataset(x1, y1, false);
  EXPECT_EQ(s.shape, (Shape{1}));
  EXPECT_EQ(s.x, (F{7, 8, 9}));
  EXPECT_EQ(s.target_width, 1);
  EXPECT_EQ(s.y, (F{0.25f, -1, 2}));
  check(s, "npy");
}

TEST_F(Npy, DatasetFromBytes) {
  std::string img(2 * 2 * 2, '\0');
  for (size_t i = 0; i < img.size(); ++i) img[i] = char(i * 37);
  const std::string x = write("x.npy", npy(1, dict("|u1", "(2, 1, 2, 2)"), img));
  const std::string l = write("l.npy", npy(1, dict("|u1", "(2,)"), std::string("\x01\x00", 2)));
  const Dataset d = read_npy_dataset(x, l, true);
  EXPECT_EQ(d.shape, (Shape{1, 2, 2}));
  EXPECT_EQ(d.x_bytes, img);
  EXPECT_TRUE(d.x.empty());
  EXPECT_EQ(d.byte_scale, 1.0f / 255.0f);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(d.num_classes, 2);
  // Zero samples.
  const std::string x0 = write("x0.npy", npy(1, dict("<f4", "(0, 5)"), ""));
  const std::string l0 = write("l0.npy", npy(1, dict("<i8", "(0,)"), ""));
  const Dataset e = read_npy_dataset(x0, l0, true);
  EXPECT_EQ(e.count, 0);
  EXPECT_EQ(e.shape, (Shape{5}));
  check(e, "empty");
}

TEST_F(Npy, DatasetErrors) {
  const std::string x = write("x.npy", npy(1, dict("<f4", "(3, 2)"), raw(F{1, 2, 3, 4, 5, 6})));
  const std::string y = write("y.npy", npy(1, dict("<f4", "(3,)"), raw(F{1, 2, 3})));
  const std::string y4 = write("y4.npy", npy(1, dict("<f4", "(4,)"), raw(F{1, 2, 3, 4})));
  EXPECT_HAS(error_of([&] { read_npy_dataset(x, y4, false); }), y4 + ": 4 samples of y for the 3 samples of X in " + x);
  const std::string xi = write("xi.npy", npy(1, dict("<i8", "(3,)"), raw(std::vector<int64_t>{1, 2, 3})));
  EXPECT_HAS(error_of([&] { read_npy_dataset(xi, y, false); }),
             xi + ": X must be float32 ('<f4'), float64 ('<f8') or uint8 ('|u1'); this file holds '<i8'");
  EXPECT_HAS(error_of([&] { read_npy_dataset(x, xi, false); }),
             xi + ": regression targets must be float32 ('<f4') or float64 ('<f8'); this file holds '<i8' (integer class labels: pass labels = true)");
  EXPECT_HAS(error_of([&] { read_npy_dataset(x, y, true); }),
             y + ": class labels must be uint8 ('|u1'), int32 ('<i4') or int64 ('<i8'); this file holds '<f4'");
  const std::string neg = write("neg.npy", npy(1, dict("<i8", "(3,)"), raw(std::vector<int64_t>{1, -1, 0})));
  EXPECT_HAS(error_of([&] { read_npy_dataset(x, neg, true); }), neg + ": label -1 of sample 1 is not in [0, 2^31 - 1)");
  const std::string l2 = write("l2.npy", npy(1, dict("<i4", "(3, 1)"), raw(std::vector<int32_t>{1, 1, 0})));
  EXPECT_HAS(error_of([&] { read_npy_dataset(x, l2, true); }), l2 + ": class labels must have shape (N,); this array has shape (3, 1)");
  const std::string y3 = write("y3.npy", npy(1, dict("<f4", "(3, 1, 1)"), raw(F{1, 2, 3})));
  EXPECT_HAS(error_of([&] { read_npy_dataset(x, y3, false); }), y3 + ": regression targets must have shape (N,) or (N, k)");
  const std::string sc = write("sc.npy", npy(1, dict("<f4", "()"), raw(F{1})));
  EXPECT_HAS(error_of([&] { read_npy_dataset(sc, y, false); }), sc + ": X must have a first dimension");
  EXPECT_HAS(error_of([&] { read_npy_dataset(x, sc, false); }), sc + ": a scalar of y for the 3 samples of X");
  const std::string empty = write("x30.npy", npy(1, dict("<f4", "(3, 0)"), ""));
  EXPECT_HAS(error_of([&] { read_npy_dataset(empty, y, false); }), empty + ": samples of shape (0,) hold no values");
}

// Files numpy wrote (gen_npy_fixtures.py).
std::string fixture(const char* name) { return std::string(HDDP_DATA_FIXTURES) + "/" + name; }

TEST_F(Npy, FilesWrittenByNumpy) {
  const F x{-0.5f, -0.25f, 0, 0.25f, 0.5f, 0.75f};  // arange(6) / 4 - 0.5, (3, 2)
  for (const char* name : {"x_f4.npy", "x_f4_v2.npy", "x_f4_v3.npy"}) {
    const NpyArray a = read_npy(fixture(name));
    EXPECT_EQ(a.dtype, "<f4") << name;
    EXPECT_EQ(a.shape, (Dims{3, 2})) << name;
    F v(6);
    ASSERT_EQ(a.bytes.size(), 24u) << name;
    std::memcpy(v.data(), a.bytes.data(), 24);
    EXPECT_EQ(v, x) << name;
  }
  EXPECT_EQ(read_npy(fixture("x_f4_v2.npy")).bytes, read_npy(fixture("x_f4_v3.npy")).bytes);

  const Dataset r = read_npy_dataset(fixture("x_f4.npy"), fixture("y_f8.npy"), false);
  EXPECT_EQ(r.count, 3);
  EXPECT_EQ(r.shape, (Shape{2}));
  EXPECT_EQ(r.x, x);
  EXPECT_EQ(r.y, (F{0.5f, -2.25f, 1000}));
  const Dataset r2 = read_npy_dataset(fixture("x_f4_v3.npy"), fixture("y2_f4.npy"), false);
  EXPECT_EQ(r2.target_width, 2);
  EXPECT_EQ(r2.y, (F{1, 2, 3, 4, 5, 6}));

  const Dataset c = read_npy_dataset(fixture("x_f8.npy"), fixture("labels_i8.npy"), true);
  EXPECT_EQ(c.x, (F{1.5f, -1, 0, 2, 3, 0.25f}));
  EXPECT_EQ(c.labels, (std::vector<int32_t>{2, 0, 1}));
  EXPECT_EQ(c.num_classes, 3);
  const Dataset c4 = read_npy_dataset(fixture("x_f8.npy"), fixture("labels_i4.npy"), true);
  EXPECT_EQ(c4.labels, (std::vector<int32_t>{4, 0, 3}));
  EXPECT_EQ(c4.num_classes, 5);

  const Dataset im = read_npy_dataset(fixture("img_u1.npy"), fixture("labels_u1.npy"), true);
  EXPECT_EQ(im.count, 2);
  EXPECT_EQ(im.shape, (Shape{1, 2, 3}));
  ASSERT_EQ(im.x_bytes.size(), 12u);
  for (size_t i = 0; i < 12; ++i) EXPECT_EQ(uint8_t(im.x_bytes[i]), uint8_t(i * 23 % 256)) << i;
  EXPECT_EQ(im.labels, (std::vector<int32_t>{1, 0}));
  std::vector<float> xb(6);
  int32_t lb = -1;
  const int64_t one = 1;
  im.gather(&one, 1, xb.data(), &lb);
  EXPECT_EQ(xb[5], 253.0f * (1.0f / 255.0f));
  EXPECT_EQ(lb, 0);

  EXPECT_HAS(error_of([] { read_npy(fixture("fortran_f4.npy")); }), "fortran_f4.npy: Fortran order is not supported");
  EXPECT_HAS(error_of([] { read_npy(fixture("big_endian_f4.npy")); }), "big_endian_f4.npy: dtype '>f4' is not supported (big-endian");
}

}  // namespace
