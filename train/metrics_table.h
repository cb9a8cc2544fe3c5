#pragma once
// A metrics table: one row of numbers per epoch under named columns, written as CSV and kept in
// a checkpoint exactly (encode/decode).
//
//   MetricsTable metrics({"epoch", "train_loss", "test_accuracy"});
//   metrics.add({3, 0.41, 0.87});
//   metrics.write_csv(out + "/metrics.csv");
//   records["metrics"] = metrics.encode();      // resumed with MetricsTable::decode
#include <cstdint>
#include <string>
#include <vector>

namespace hddp {

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

}  // namespace hddp
