#include <hddp/train/json_lines.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include <hddp/kernels/check.h>

namespace hddp {

struct JsonLines::Impl {
  std::string path;
  std::ofstream out;
};

JsonLines::JsonLines(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->out.open(path, std::ios::trunc);
  HDDP_CHECK(impl_->out, "cannot write '" << path << "'");
}

JsonLines::~JsonLines() = default;

void JsonLines::write(const Object& fields) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& [name, v] : fields) std::visit([&](const auto& x) { j[name] = x; }, v);
  write_line(j.dump());
}

void JsonLines::write_line(const std::string& json) {
  impl_->out << json << '\n';  // a regular file: never blocks for long
  impl_->out.flush();
}

void JsonLines::close() {
  impl_->out.close();
  HDDP_CHECK(!impl_->out.fail(), "error writing '" << impl_->path << "'");
}

}  // namespace hddp
