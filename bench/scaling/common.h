#pragma once
// bench/scaling: helpers shared by the orchestrator, the workers and the plots.
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <hddp/core/util.h>
#include "common/options.h"

namespace scaling {

using hddp::file_exists, hddp::split;

// A user-facing error: printed as "scaling: error: ..." and exit code 1 (2 for usage).
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};
using UsageError = hddp::cli::UsageError;

// Workers print one measurement per line as "@row key=value key=value ..." (values without
// spaces); everything else on their stdout is ignored.
using Row = std::map<std::string, std::string>;
std::string row_line(const std::vector<std::pair<std::string, std::string>>& kv);
std::vector<Row> parse_rows(const std::string& out);
double num(const Row& r, const std::string& key);  // throws Failure naming the key

std::string fmt(double v, int significant = 6);

// A child process: argv[0] looked up in PATH; `set` added to / `unset` removed from this
// process's environment; stdout and stderr captured. Killed (its whole process group) after
// timeout_s seconds.
struct ProcResult {
  int exit_code = -1;  // 128 + signal if killed by a signal
  bool timed_out = false;
  std::string out, err;
};
ProcResult run_process(const std::vector<std::string>& argv,
                       const std::vector<std::pair<std::string, std::string>>& set,
                       const std::vector<std::string>& unset, double timeout_s);

// flock(2) on a shared lock file around each measurement (the same lock as
// `flock /tmp/hddp-bench.lock cmd`), so benchmarks of several users do not overlap. An empty
// path disables it.
class BenchLock {
 public:
  // max_wait_s > 0: after waiting that long once, go on without the lock (with a warning),
  // and from then on take it only when it is free.
  explicit BenchLock(std::string path, double max_wait_s = 0) : path_(std::move(path)), max_wait_s_(max_wait_s) {}
  ~BenchLock();
  void lock();    // blocks; says once on stderr when it has to wait
  void unlock();
  // The lock for a scope: `const BenchLock::Held held = lock.hold();`.
  struct Held {
    explicit Held(BenchLock& lock) : l(lock) { l.lock(); }
    Held(const Held&) = delete;
    ~Held() { l.unlock(); }
    BenchLock& l;
  };
  [[nodiscard]] Held hold() { return Held(*this); }

 private:
  std::string path_;
  double max_wait_s_;
  int fd_ = -1;
  bool said_ = false, held_ = false, gave_up_ = false;
};

double load_average();     // 1-minute load average (/proc/loadavg), -1 if unknown
std::string cpu_model();   // /proc/cpuinfo "model name", or "unknown"
int available_cores();     // CPUs in this process's affinity mask (see unbind_self)
// With OMP_PROC_BIND set, libgomp binds the initial thread to the first place when the
// program starts - and children inherit that mask, so every worker would see one core.
// Resets this thread's mask to the union of all OpenMP places (the mask the process started
// with); does nothing without places.
void unbind_self();

// CSV files written by the studies: a header and rows of plain fields (no quoting needed:
// no field holds a comma).
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  int col(const std::string& name) const;  // throws Failure if missing
  double num(size_t row, const std::string& name) const;
  const std::string& str(size_t row, const std::string& name) const;
};
void write_csv(const std::string& path, const Table& t);  // atomically (hddp::write_file_atomic)
Table read_csv(const std::string& path);

}  // namespace scaling
