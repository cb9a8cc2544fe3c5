#pragma once
// A Chrome-trace / Perfetto timeline: complete events ("ph":"X") with microsecond times,
// written as JSON at the end (open in chrome://tracing or ui.perfetto.dev).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace hddp {

class Trace {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Trace(int pid = 0) : pid_(pid), t0_(Clock::now()) {}

  // An event from t_begin to t_end on lane tid (0: compute, 1: communication, ...).
  void add(std::string name, const char* category, Clock::time_point t_begin,
           Clock::time_point t_end, int tid = 0);
  // The events as a JSON array body (no brackets), for merging several ranks' traces.
  std::string events_json() const;
  // One {"traceEvents": [...]} document from several events_json() bodies (one per rank; empty
  // ones are skipped), comma-separated.
  static std::string document(const std::vector<std::string>& bodies);
  size_t size() const { return events_.size(); }

 private:
  struct Event {
    std::string name;
    const char* cat;
    double ts_us, dur_us;
    int tid;
  };
  int pid_;
  Clock::time_point t0_;
  std::vector<Event> events_;
};

}  // namespace hddp
