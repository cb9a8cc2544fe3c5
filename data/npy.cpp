#include <hddp/data/npy.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <string_view>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {
namespace {

static_assert(std::endian::native == std::endian::little, "the .npy reader copies little-endian data as is");

constexpr size_t kMaxDims = 64;

size_t itemsize(const std::string& dtype) {
  if (dtype == "<f4" || dtype == "<i4") return 4;
  if (dtype == "<f8" || dtype == "<i8") return 8;
  if (dtype == "|u1") return 1;
  return 0;
}

// The header dict, as numpy writes it: {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// then spaces and '\n'. A small recursive-descent parser over Python literal syntax; `bad`
// throws naming the file and the position, quoting at most 200 bytes of the header (it may be
// 4 GiB).
struct HeaderParser {
  const std::string& path;
  std::string_view h;
  size_t i = 0;

  [[noreturn]] void bad(const std::string& what) const {
    HDDP_CHECK(false, path << ": malformed .npy header: " << what << " at byte " << i << " of " << quote_input(h));
  }
  void ws() {
    while (i < h.size() && (h[i] == ' ' || h[i] == '\t' || h[i] == '\n')) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < h.size() && h[i] == c) return ++i, true;
    return false;
  }
  void expect(char c) {
    if (!eat(c)) bad(std::string("expected '") + c + "'");
  }
  std::string str() {
    ws();
    if (i >= h.size() || (h[i] != '\'' && h[i] != '"')) bad("expected a string");
    const char q = h[i++];
    const size_t end = h.find(q, i);
    if (end == std::string_view::npos) bad("an unterminated string");
    std::string s(h.substr(i, end - i));
    if (s.find('\\') != std::string::npos) bad("an escape in a string");
    i = end + 1;
    return s;
  }
  bool boolean() {
    ws();
    for (const auto& [word, v] : {std::pair{"True", true}, std::pair{"False", false}})
      if (h.substr(i, std::strlen(word)) == word) return i += std::strlen(word), v;
    bad("expected True or False");
  }
  int64_t integer() {
    ws();
    const size_t start = i;
    int64_t v = 0;
    while (i < h.size() && h[i] >= '0' && h[i] <= '9') {
      const int digit = h[i++] - '0';
      if (v > (INT64_MAX - digit) / 10) bad("a dimension too large");
      v = v * 10 + digit;
    }
    if (i == start) bad("expected a dimension (a non-negative integer)");
    return v;
  }
  // A Python tuple of integers: (), (n,), (n, m), (n, m,) - "(n)" is an integer, not a tuple.
  // At most kMaxDims of them (numpy's own limit is 32, 64 since numpy 2).
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> t;
    if (eat(')')) return t;
    for (;;) {
      if (t.size() == kMaxDims) bad("more than " + std::to_string(kMaxDims) + " dimensions");
      t.push_back(integer());
      const bool comma = eat(',');
      if (eat(')')) {
        if (t.size() == 1 && !comma) bad("'(n)' is not a tuple: a 1-dimensional shape is '(n,)'");
        return t;
      }
      if (!comma) bad("expected ',' or ')'");
    }
  }
};

NpyArray parse(std::string bytes, const std::string& path) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  HDDP_CHECK(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0,
             path << ": not an .npy file: it does not start with the magic \\x93NUMPY");
  const int major = b[6], minor = b[7];
  HDDP_CHECK((major == 1 || major == 2 || major == 3) && minor == 0,
             path << ": .npy format version " << major << "." << minor << " is not supported (1.0, 2.0 and 3.0 are)");
  size_t len = size_t(b[8]) | size_t(b[9]) << 8, start = 10;
  if (major >= 2) {
    HDDP_CHECK(bytes.size() >= 12, path << ": truncated .npy header: " << bytes.size() << " bytes");
    len |= size_t(b[10]) << 16 | size_t(b[11]) << 24;
    start = 12;
  }
  HDDP_CHECK(bytes.size() - start >= len, path << ": truncated .npy header: " << len << " bytes announced, "
                                                << bytes.size() - start << " in the file");
  HeaderParser p{path, std::string_view(bytes).substr(start, len)};
  NpyArray a;
  bool seen[3] = {false, false, false}, fortran = false;
  p.expect('{');
  while (!p.eat('}')) {
    const std::string key = p.str();
    p.expect(':');
    if (key == "descr" && !seen[0]) {
      p.ws();
      HDDP_CHECK(p.i >= p.h.size() || p.h[p.i] != '[',
                 path << ": a structured dtype (a list of fields) is not supported: save a plain array");
      a.dtype = p.str();
      seen[0] = true;
    } else if (key == "fortran_order" && !seen[1]) {
      fortran = p.boolean();
      seen[1] = true;
    } else if (key == "shape" && !seen[2]) {
      a.shape = p.tuple();
      seen[2] = true;
    } else {
      p.bad("unexpected or repeated key " + quote_input(key, 40));
    }
    if (!p.eat(',')) {
      p.expect('}');
      break;
    }
  }
  p.ws();
  if (p.i != p.h.size()) p.bad("text after the dict");
  for (int k = 0; k < 3; ++k)
    if (!seen[k]) p.bad(std::string("no key '") + (k == 0 ? "descr" : k == 1 ? "fortran_order" : "shape") + "'");
  HDDP_CHECK(!fortran, path << ": Fortran order is not supported: save with np.ascontiguousarray");
  const size_t item = itemsize(a.dtype);
  HDDP_CHECK(item > 0, path << ": dtype " << quote_input(a.dtype, 40) << " is not supported"
                            << (a.dtype.size() > 1 && a.dtype.size() < 8 && a.dtype[0] == '>'
                                    ? " (big-endian: save with .astype('<" + a.dtype.substr(1) + "'))"
                                    : "")
                            << "; read are '<f4' (float32), '<f8' (float64), '|u1' (uint8), '<i4' (int32), '<i8' (int64)");
  // Checked against the bytes present before anything is allocated: the data is the file's
  // own buffer, taken over.
  const std::string what = path + ": shape " + to_string(a.shape) + " of '" + a.dtype + "' overflows";
  const uint64_t need = checked_mul(uint64_t(checked_product(a.shape, what)), item, what, uint64_t(INT64_MAX));
  const uint64_t have = bytes.size() - start - len;
  HDDP_CHECK(have >= need, path << ": truncated: shape " << to_string(a.shape) << " of '" << a.dtype << "' needs " << need
                                << " bytes of data, the file has " << have);
  HDDP_CHECK(have == need, path << ": " << have - need << " bytes after the " << need << " that shape "
                                << to_string(a.shape) << " of '" << a.dtype << "' describes");
  bytes.erase(0, start + len);
  a.bytes = std::move(bytes);
  return a;
}

template <class T>
T at(const std::string& bytes, size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace

NpyArray read_npy(const std::string& path) { return parse(read_file(path), path); }

Dataset read_npy_dataset(const std::string& x_path, const std::string& y_path, bool labels) {
  NpyArray x = read_npy(x_path);
  const NpyArray y = read_npy(y_path);
  HDDP_CHECK(!x.shape.empty(), x_path << ": X must have a first dimension (the samples); this array is a scalar");
  Dataset d;
  d.count = x.shape[0];
  d.shape.assign(x.shape.begin() + 1, x.shape.end());
  if (d.shape.empty()) d.shape = {1};
  HDDP_CHECK(d.features() > 0, x_path << ": samples of shape " << to_string(d.shape) << " hold no values");
  const size_t n = size_t(d.count) * size_t(d.features());
  if (x.dtype == "|u1") {
    d.x_bytes = std::move(x.bytes);
  } else if (x.dtype == "<f4") {
    d.x.resize(n);
    if (n > 0) std::memcpy(d.x.data(), x.bytes.data(), n * sizeof(float));
  } else if (x.dtype == "<f8") {
    d.x.resize(n);
    for (size_t i = 0; i < n; ++i) d.x[i] = float(at<double>(x.bytes, i));
  } else {
    HDDP_CHECK(false, x_path << ": X must be float32 ('<f4'), float64 ('<f8') or uint8 ('|u1'); this file holds '"
                             << x.dtype << "'");
  }

  HDDP_CHECK(!y.shape.empty() && y.shape[0] == d.count,
             y_path << ": " << (y.shape.empty() ? "a scalar" : std::to_string(y.shape[0]) + " samples") << " of y for the "
                    << d.count << " samples of X in " << x_path);
  if (labels) {
    HDDP_CHECK(y.shape.size() == 1, y_path << ": class labels must have shape (N,); this array has shape " << to_string(y.shape));
    HDDP_CHECK(y.dtype == "|u1" || y.dtype == "<i4" || y.dtype == "<i8",
               y_path << ": class labels must be uint8 ('|u1'), int32 ('<i4') or int64 ('<i8'); this file holds '" << y.dtype << "'");
    d.labels.resize(size_t(d.count));
    for (size_t i = 0; i < size_t(d.count); ++i) {
      const int64_t v = y.dtype == "|u1" ? int64_t(uint8_t(y.bytes[i]))
                        : y.dtype == "<i4" ? int64_t(at<int32_t>(y.bytes, i))
                                           : at<int64_t>(y.bytes, i);
      HDDP_CHECK(v >= 0 && v < INT32_MAX, y_path << ": label " << v << " of sample " << i << " is not in [0, 2^31 - 1)");
      d.labels[i] = int32_t(v);
      d.num_classes = std::max(d.num_classes, d.labels[i] + 1);
    }
  } else {
    HDDP_CHECK(y.shape.size() <= 2, y_path << ": regression targets must have shape (N,) or (N, k); this array has shape "
                                           << to_string(y.shape));
    HDDP_CHECK(y.dtype == "<f4" || y.dtype == "<f8",
               y_path << ": regression targets must be float32 ('<f4') or float64 ('<f8'); this file holds '" << y.dtype
                      << "' (integer class labels: pass labels = true)");
    d.target_width = y.shape.size() == 2 ? y.shape[1] : 1;
    const size_t m = size_t(d.count) * size_t(d.target_width);
    d.y.resize(m);
    for (size_t i = 0; i < m; ++i) d.y[i] = y.dtype == "<f4" ? at<float>(y.bytes, i) : float(at<double>(y.bytes, i));
  }
  return d;
}

}  // namespace hddp
