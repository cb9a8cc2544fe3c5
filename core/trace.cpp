#include "core/trace.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "kernels/check.h"

namespace hddp {

void Trace::add(std::string name, const char* category, Clock::time_point t_begin,
                Clock::time_point t_end, int tid) {
  using us = std::chrono::duration<double, std::micro>;
  events_.push_back({std::move(name), category, us(t_begin - t0_).count(), us(t_end - t_begin).count(), tid});
}

std::string Trace::events_json() const {
  std::ostringstream os;
  char buf[128];
  for (size_t i = 0; i < events_.size(); ++i) {
    const Event& e = events_[i];
    std::snprintf(buf, sizeof buf, "\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d", e.ts_us, e.dur_us, pid_, e.tid);
    os << (i ? ",\n" : "") << "{\"name\":\"" << e.name << "\",\"cat\":\"" << e.cat << "\",\"ph\":\"X\"," << buf << "}";
  }
  return os.str();
}

std::string Trace::document(const std::vector<std::string>& bodies) {
  std::string doc = "{\"traceEvents\":[\n";
  bool first = true;
  for (const std::string& b : bodies) {
    if (b.empty()) continue;
    if (!first) doc += ",\n";
    doc += b;
    first = false;
  }
  return doc + "\n]}\n";
}

void Trace::write(const std::string& path) const {
  std::ofstream f(path);
  HDDP_CHECK(f, "cannot write trace file '" << path << "'");
  f << document({events_json()});
  HDDP_CHECK(f.good(), "error writing trace file '" << path << "'");
}

}  // namespace hddp
