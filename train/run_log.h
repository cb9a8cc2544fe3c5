#pragma once
// What a run writes while it trains, besides the checkpoint: progress lines that never block
// (train/line_log.h), the time left, a metrics table (one row per epoch; written as CSV, kept in
// the checkpoint exactly) and JSON lines for programs.
//
//   MetricsTable metrics({"epoch", "train_loss", "test_accuracy"});
//   metrics.add({3, 0.41, 0.87});
//   write_file_atomic(out + "/metrics.csv", metrics.csv());
//   records["metrics"] = metrics.encode();      // resumed with MetricsTable::decode
//   JsonLines json("stats.jsonl");  json.write({{"type", "epoch"}, {"epoch", 3}, {"loss", 0.41}});
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <hddp/train/line_log.h>

namespace hddp {

// "ETA 12 s", "ETA 3 min 20 s", "ETA 1 h 05 min": the time `left` steps take at the rate of
// `done` steps in `elapsed_s` seconds ("ETA ?" before the first).
std::string eta(double elapsed_s, int64_t done, int64_t left);

// Rows of numbers under named columns.
class MetricsTable {
 public:
  explicit MetricsTable(std::vector<std::string> columns);
  // Throws std::invalid_argument when the row's width differs from the columns'.
  void add(std::vector<double> row);
  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::vector<double>>& rows() const { return rows_; }
  size_t size() const { return rows_.size(); }
  double at(size_t row, const std::string& column) const;  // throws for an unknown column
  void truncate(size_t n);                                  // keep the first n rows

  // The CSV: the header, then each row ("%.9g" per value: an integer prints as one); written
  // atomically (a temporary file, fsync, rename), hddp::Error naming the path on failure.
  std::string csv() const;
  void write_csv(const std::string& path) const;
  // The exact values as bytes (a checkpoint record), and back; decode throws hddp::Error
  // naming `what` for bytes that are not such a table or have other columns.
  std::string encode() const;
  static MetricsTable decode(const std::string& bytes, const std::vector<std::string>& columns, const std::string& what);

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<double>> rows_;
};

// A JSON lines file: one object per write, fields in the given order. Opened (truncated) by the
// constructor; throws hddp::Error naming the path when it cannot be written.
class JsonLines {
 public:
  using Value = std::variant<int64_t, double, std::string, bool>;
  using Object = std::vector<std::pair<std::string, Value>>;
  explicit JsonLines(const std::string& path);
  ~JsonLines();
  void write(const Object& fields);
  void write_line(const std::string& json);  // one object already written as JSON text
  void close();  // throws hddp::Error when the data did not reach the file

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hddp
