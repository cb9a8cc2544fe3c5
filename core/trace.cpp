#include <hddp/core/trace.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include <hddp/kernels/check.h>

namespace hddp {

void Trace::add(std::string name, const char* category, Clock::time_point t_begin,
                Clock::time_point t_end, int tid) {
  using us = std::chrono::duration<double, std::micro>;
  events_.push_back({std::move(name), category, us(t_begin - t0_).count(), us(t_end - t_begin).count(), tid});
}

std::string Trace::events_json() const {
  // Complete events ("ph": "X") of the Trace Event Format, times in us rounded to ns; one per
  // line, so that bodies of several ranks join with a comma (document()).
  auto ns = [](double us) { return std::round(us * 1e3) / 1e3; };
  std::string out;
  for (const Event& e : events_) {
    const nlohmann::ordered_json j{{"name", e.name}, {"cat", e.cat},   {"ph", "X"},   {"ts", ns(e.ts_us)},
                                   {"dur", ns(e.dur_us)}, {"pid", pid_}, {"tid", e.tid}};
    out += (out.empty() ? "" : ",\n") + j.dump();
  }
  return out;
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

}  // namespace hddp
