#include <hddp/data/csv.h>

#include <csv.h>
#include <malloc.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <unordered_map>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {
namespace {

// Line breaks in s: LF, CRLF and a lone CR count one each.
int64_t line_breaks(std::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n' || (s[i] == '\r' && (i + 1 == s.size() || s[i + 1] != '\n'))) ++n;
  return n;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// A file's header may hold millions of names, each of megabytes: a message lists at most
// kListed of them, each quoted and cut to kNameBytes, then the count.
constexpr size_t kListed = 20, kNameBytes = 60;
// More columns than any table has; each costs a string per row being parsed.
constexpr size_t kMaxColumns = size_t(1) << 20;

std::string name(const std::string& s) { return quote_input(s, kNameBytes); }

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < kListed; ++i) s += (i ? ", " : "") + name(v[i]);
  if (v.size() > kListed) s += ", ... (" + std::to_string(v.size()) + " columns)";
  return s;
}

// libcsv calls on_field per field and on_row at each unquoted line end; with CSV_REPALL_NL
// every CR and LF is reported, which is how lines are counted. The callbacks are called from C:
// nothing may be thrown through them, so the first exception is kept and rethrown after.
struct Reader {
  Reader(const std::string& p, const CsvOptions& opt) : path(p), o(opt) {}
  const std::string& path;
  const CsvOptions& o;
  std::vector<std::string> fields;
  size_t nfields = 0;
  int64_t line = 1, row_line = 1;  // the line the parser is on, the line the current row began on
  bool last_cr = false;
  bool have_header = false;
  std::vector<std::string> header;
  std::unordered_map<std::string_view, size_t> column_of;  // views of header's strings
  std::vector<size_t> xcol, ycol;  // the columns of the features and of the targets
  Dataset d;
  std::exception_ptr error;

  void field(std::string_view s) {
    if (nfields == 0) row_line = line;
    // A data row's fields past the header's count are only counted (the row is refused at its
    // end); a header is refused past kMaxColumns.
    if (!have_header || nfields < header.size()) {
      HDDP_CHECK(nfields < kMaxColumns, path << ": line " << row_line << ": more than " << kMaxColumns << " columns");
      if (fields.size() == nfields) fields.emplace_back();
      fields[nfields].assign(s);
    }
    ++nfields;
    line += line_breaks(s);  // only a quoted field holds line breaks
    last_cr = false;
  }

  void row_end(int c) {
    if (c == '\r' || (c == '\n' && !last_cr)) ++line;
    last_cr = c == '\r';
    if (nfields == 0) return;  // a blank line, or the LF of a CRLF
    if (!have_header) {
      set_header();
    } else {
      data_row();
    }
    nfields = 0;
  }

  void set_header() {
    header.assign(fields.begin(), fields.begin() + ptrdiff_t(nfields));
    fields.resize(nfields);  // a data row never stores more
    fields.shrink_to_fit();
    column_of.reserve(header.size());
    for (size_t c = 0; c < header.size(); ++c) {
      const auto [it, fresh] = column_of.emplace(header[c], c);
      HDDP_CHECK(fresh, path << ": duplicate column name " << name(header[c]) << " (columns " << it->second + 1 << " and "
                             << c + 1 << ")");
    }
    auto column = [&](const std::string& col, const char* role) {
      const auto it = column_of.find(col);
      HDDP_CHECK(it != column_of.end(), path << ": no column " << name(col) << " (" << role << "); the columns are " << join(header));
      return it->second;
    };
    for (const std::string& t : o.targets) ycol.push_back(column(t, "target"));
    for (const std::string& f : o.features) xcol.push_back(column(f, "feature"));
    if (o.features.empty()) {
      std::vector<bool> target(header.size(), false);
      for (size_t c : ycol) target[c] = true;
      for (size_t c = 0; c < header.size(); ++c)
        if (!target[c]) xcol.push_back(c);
    }
    HDDP_CHECK(!xcol.empty(), path << ": no feature columns: every column (" << join(header) << ") is a target");
    for (size_t c : xcol) d.feature_names.push_back(header[c]);
    for (size_t c : ycol) d.target_names.push_back(header[c]);
    d.shape = {int64_t(xcol.size())};
    d.target_width = o.labels ? 0 : int64_t(ycol.size());
    have_header = true;
  }

  // "line L, column C ('name')"
  std::string where(size_t c) const {
    return path + ": line " + std::to_string(row_line) + ", column " + std::to_string(c + 1) + " (" + name(header[c]) + ")";
  }

  float number(size_t c) const {
    std::string_view s = trim(fields[c]);
    HDDP_CHECK(!s.empty(), where(c) << ": empty cell");
    if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);  // from_chars takes no '+'
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    HDDP_CHECK(ec != std::errc::result_out_of_range, where(c) << ": " << name(fields[c]) << " is out of range");
    HDDP_CHECK(ec == std::errc() && end == s.data() + s.size() && std::isfinite(v),
               where(c) << ": " << name(fields[c]) << " is not a number");
    HDDP_CHECK(std::isfinite(float(v)), where(c) << ": " << name(fields[c]) << " is out of range for float");
    return float(v);
  }

  int32_t label(size_t c) const {
    std::string_view s = trim(fields[c]);
    HDDP_CHECK(!s.empty(), where(c) << ": empty cell");
    if (s.size() > 1 && s[0] == '+' && s[1] != '-') s.remove_prefix(1);
    int64_t v = -1;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    HDDP_CHECK(ec == std::errc() && end == s.data() + s.size() && v >= 0 && v < INT32_MAX,
               where(c) << ": label " << name(fields[c]) << " is not an integer >= 0");
    return int32_t(v);
  }

  void data_row() {
    HDDP_CHECK(nfields == header.size(), path << ": line " << row_line << ": " << nfields
                                              << (nfields == 1 ? " field" : " fields") << ", the header has "
                                              << header.size());
    for (size_t c : xcol) d.x.push_back(number(c));
    for (size_t c : ycol) {
      if (o.labels) {
        d.labels.push_back(label(c));
        d.num_classes = std::max(d.num_classes, d.labels.back() + 1);
      } else {
        d.y.push_back(number(c));
      }
    }
    ++d.count;
  }
};

void on_field(void* s, size_t n, void* p) {
  auto* r = static_cast<Reader*>(p);
  if (r->error) return;
  try {
    r->field(n ? std::string_view(static_cast<const char*>(s), n) : std::string_view());
  } catch (...) {
    r->error = std::current_exception();
  }
}

void on_row(int c, void* p) {
  auto* r = static_cast<Reader*>(p);
  if (r->error) return;
  try {
    r->row_end(c);
  } catch (...) {
    r->error = std::current_exception();
  }
}

int space_not_tab(unsigned char c) { return c == ' '; }
int tab_not_space(unsigned char c) { return c == '\t'; }

// libcsv grows its buffer for the current cell by a fixed 128 bytes per realloc: a cell of
// 16 MiB took 131,072 reallocs, each copying the cell wherever realloc cannot extend in place
// (minutes under AddressSanitizer). This realloc doubles instead: a request that fits the block
// already held returns it as is.
void* grow(void* p, size_t n) {
  if (p && ::malloc_usable_size(p) >= n) return p;
  return std::realloc(p, n < (size_t(1) << 62) ? std::bit_ceil(n) : n);
}

// Frees the parser on every path out.
struct Parser {
  csv_parser p{};
  Parser(unsigned char options) {
    HDDP_CHECK(csv_init(&p, options) == 0, "read_csv: libcsv: out of memory");
    csv_set_realloc_func(&p, grow);
  }
  ~Parser() { csv_free(&p); }
};

void check_options(const CsvOptions& o) {
  HDDP_CHECK_ARG(!o.labels || o.targets.size() == 1,
                 "read_csv: labels = true needs exactly one target column, got " << o.targets.size());
  HDDP_CHECK_ARG(o.delimiter != '"' && o.delimiter != '\n' && o.delimiter != '\r',
                 "read_csv: the delimiter cannot be a quote or a line end");
  std::vector<std::string> all = o.targets;
  all.insert(all.end(), o.features.begin(), o.features.end());
  for (size_t i = 0; i < all.size(); ++i)
    for (size_t k = 0; k < i; ++k)
      HDDP_CHECK_ARG(all[i] != all[k], "read_csv: column '" << all[i] << "' is listed twice among the targets and features");
}

}  // namespace

Dataset read_csv(const std::string& path, const CsvOptions& o) {
  check_options(o);
  const std::string text = read_file(path);
  std::string_view body = text;
  if (body.substr(0, 3) == "\xEF\xBB\xBF") body.remove_prefix(3);  // a UTF-8 BOM

  Parser parser(CSV_STRICT | CSV_STRICT_FINI | CSV_REPALL_NL);
  csv_set_delim(&parser.p, static_cast<unsigned char>(o.delimiter));
  if (o.delimiter == '\t') csv_set_space_func(&parser.p, space_not_tab);
  if (o.delimiter == ' ') csv_set_space_func(&parser.p, tab_not_space);
  Reader r(path, o);
  // In slices of 1 MiB, to stop soon after the first bad row.
  for (size_t at = 0; at < body.size() && !r.error;) {
    const size_t n = std::min<size_t>(body.size() - at, size_t(1) << 20);
    const size_t done = csv_parse(&parser.p, body.data() + at, n, on_field, on_row, &r);
    if (r.error) break;
    if (done != n) {
      const int e = csv_error(&parser.p);
      HDDP_CHECK(e != CSV_EPARSE, path << ": line " << 1 + line_breaks(body.substr(0, at + done))
                                       << ": malformed CSV: a '\"' inside an unquoted field, or text after a closing "
                                          "quote (quote the whole field and double the quotes inside it)");
      HDDP_CHECK(false, path << ": libcsv: " << csv_strerror(e));
    }
    at += n;
  }
  if (!r.error) {
    HDDP_CHECK(csv_fini(&parser.p, on_field, on_row, &r) == 0,
               path << ": line " << (r.nfields ? r.row_line : r.line) << ": a quoted field is never closed");
  }
  if (r.error) std::rethrow_exception(r.error);
  HDDP_CHECK(r.have_header, path << ": no data rows (an empty file)");
  HDDP_CHECK(r.d.count > 0, path << ": no data rows (only the header)");
  return std::move(r.d);
}

}  // namespace hddp
