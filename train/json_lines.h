#pragma once
// JSON lines for programs that read a run's results: one object per line.
//
//   JsonLines json("stats.jsonl");
//   json.write({{"type", "epoch"}, {"epoch", 3}, {"loss", 0.41}});
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace hddp {

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
