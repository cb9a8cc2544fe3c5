#include <hddp/train/metrics_table.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

MetricsTable::MetricsTable(std::vector<std::string> columns) : columns_(std::move(columns)) {
  HDDP_CHECK_ARG(!columns_.empty(), "MetricsTable: no columns");
}

void MetricsTable::add(std::vector<double> row) {
  HDDP_CHECK_ARG(row.size() == columns_.size(),
                 "MetricsTable::add: " << row.size() << " values for " << columns_.size() << " columns");
  rows_.push_back(std::move(row));
}

double MetricsTable::at(size_t row, const std::string& column) const {
  for (size_t c = 0; c < columns_.size(); ++c)
    if (columns_[c] == column) return rows_.at(row)[c];
  HDDP_CHECK_ARG(false, "MetricsTable: no column '" << column << "'");
  return 0;
}

void MetricsTable::truncate(size_t n) {
  if (n < rows_.size()) rows_.resize(n);
}

namespace {

// "a,b,c\n". (Appended piece by piece: GCC 12's -Wrestrict misfires on "," + name.)
std::string header(const std::vector<std::string>& columns) {
  std::string out;
  for (size_t c = 0; c < columns.size(); ++c) {
    if (c) out.push_back(',');
    out.append(columns[c]);
  }
  out.push_back('\n');
  return out;
}

}  // namespace

std::string MetricsTable::csv() const {
  std::string out = header(columns_);
  char b[40];
  for (const std::vector<double>& r : rows_) {
    for (size_t c = 0; c < r.size(); ++c) {
      std::snprintf(b, sizeof b, "%s%.9g", c ? "," : "", r[c]);
      out.append(b);
    }
    out.push_back('\n');
  }
  return out;
}

void MetricsTable::write_csv(const std::string& path) const { write_file_atomic(path, csv()); }

// Bytes: the header line (columns joined by ','), '\n', then the values as doubles.
std::string MetricsTable::encode() const {
  std::string out = header(columns_);
  for (const std::vector<double>& r : rows_) out.append(reinterpret_cast<const char*>(r.data()), r.size() * sizeof(double));
  return out;
}

MetricsTable MetricsTable::decode(const std::string& bytes, const std::vector<std::string>& columns,
                                  const std::string& what) {
  MetricsTable t(columns);
  const size_t nl = bytes.find('\n');
  HDDP_CHECK(nl != std::string::npos, what << ": not a metrics table (no header)");
  HDDP_CHECK(bytes.substr(0, nl) == t.encode().substr(0, nl),
             what << ": the metrics have columns '" << bytes.substr(0, nl) << "', this program writes '"
                  << t.encode().substr(0, t.encode().size() - 1) << "'");
  const size_t width = columns.size() * sizeof(double), body = bytes.size() - nl - 1;
  HDDP_CHECK(body % width == 0, what << ": " << body << " bytes of metrics, not a whole number of rows of "
                                     << columns.size() << " values");
  for (size_t off = nl + 1; off < bytes.size(); off += width) {
    std::vector<double> r(columns.size());
    std::memcpy(r.data(), bytes.data() + off, width);
    t.rows_.push_back(std::move(r));
  }
  return t;
}

}  // namespace hddp
