#include "common.h"

#include <fcntl.h>
#include <omp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace scaling {

std::string row_line(const std::vector<std::pair<std::string, std::string>>& kv) {
  std::string s = "@row";
  for (const auto& [k, v] : kv) s += " " + k + "=" + v;
  return s;
}

std::vector<Row> parse_rows(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("@row ", 0) != 0) continue;
    Row r;
    std::istringstream ls(line.substr(5));
    std::string kv;
    while (ls >> kv) {
      const size_t eq = kv.find('=');
      if (eq != std::string::npos) r[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

double num(const Row& r, const std::string& key) {
  const auto it = r.find(key);
  if (it == r.end()) throw Failure("worker output lacks '" + key + "'");
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (end == it->second.c_str() || *end) throw Failure("worker output: '" + key + "=" + it->second + "' is not a number");
  return v;
}

std::string fmt(double v, int significant) {
  if (!std::isfinite(v)) return "nan";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", significant, v);
  return buf;
}

namespace {
// The running child's process group: SIGINT/SIGTERM to the orchestrator end it too (the
// child has its own group so that a timeout can kill mpiexec and its ranks).
volatile sig_atomic_t g_child = 0;
extern "C" void forward_and_die(int sig) {
  if (g_child > 0) kill(-pid_t(g_child), SIGTERM);
  signal(sig, SIG_DFL);
  raise(sig);
}
void install_forwarding() {
  static bool done = false;
  if (done) return;
  done = true;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, forward_and_die);
}
}  // namespace

ProcResult run_process(const std::vector<std::string>& argv,
                       const std::vector<std::pair<std::string, std::string>>& set,
                       const std::vector<std::string>& unset, double timeout_s) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw Failure(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // its own process group: a timeout kills mpiexec and its ranks too
    for (const std::string& k : unset) unsetenv(k.c_str());
    for (const auto& [k, v] : set) setenv(k.c_str(), v.c_str(), 1);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run '%s': %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  install_forwarding();
  g_child = pid;
  close(out_pipe[1]);
  close(err_pipe[1]);
  ProcResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* dst[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      r.timed_out = true;
      kill(-pid, SIGTERM);
      std::this_thread::sleep_for(std::chrono::seconds(2));
      kill(-pid, SIGKILL);
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min(left * 1000.0, 1000.0)) + 1);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        dst[i]->append(buf, size_t(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

BenchLock::~BenchLock() {
  if (fd_ >= 0) close(fd_);
}

void BenchLock::lock() {
  if (path_.empty()) return;
  if (fd_ < 0) {
    fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) throw Failure("--lock: cannot open '" + path_ + "': " + std::strerror(errno));
  }
  if (flock(fd_, LOCK_EX | LOCK_NB) == 0) {
    held_ = true;
    return;
  }
  if (errno != EWOULDBLOCK) throw Failure("--lock: flock '" + path_ + "': " + std::strerror(errno));
  if (gave_up_) return;
  if (!said_) {
    std::fprintf(stderr, "scaling: waiting for %s (another benchmark holds it)\n", path_.c_str());
    said_ = true;
  }
  if (max_wait_s_ <= 0) {
    while (flock(fd_, LOCK_EX) != 0)
      if (errno != EINTR) throw Failure("--lock: flock '" + path_ + "': " + std::strerror(errno));
    held_ = true;
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(max_wait_s_);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      held_ = true;
      return;
    }
  }
  std::fprintf(stderr, "scaling: warning: %s still held after %.0f s (--lock-wait); measuring without it from now on\n",
               path_.c_str(), max_wait_s_);
  gave_up_ = true;
}

void BenchLock::unlock() {
  if (fd_ >= 0 && held_) flock(fd_, LOCK_UN);
  held_ = false;
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  if (!(f >> l)) return -1;
  return l;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(c + 2);
    }
  return "unknown";
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void unbind_self() {
  const int places = omp_get_num_places();
  if (places <= 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int p = 0; p < places; ++p) {
    std::vector<int> ids(static_cast<size_t>(omp_get_place_num_procs(p)));
    omp_get_place_proc_ids(p, ids.data());
    for (int c : ids)
      if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  if (CPU_COUNT(&set) > 0) sched_setaffinity(0, sizeof set, &set);
}

int Table::col(const std::string& name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return static_cast<int>(i);
  throw Failure("CSV has no column '" + name + "'");
}

double Table::num(size_t row, const std::string& name) const {
  const std::string& s = str(row, name);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  return end == s.c_str() ? NAN : v;
}

const std::string& Table::str(size_t row, const std::string& name) const { return rows.at(row).at(size_t(col(name))); }

void write_csv(const std::string& path, const Table& t) {
  std::string text;
  auto line = [&](const std::vector<std::string>& v) {
    for (size_t i = 0; i < v.size(); ++i) text += (i ? "," : "") + v[i];
    text += '\n';
  };
  line(t.header);
  for (const auto& r : t.rows) line(r);
  hddp::write_file_atomic(path, text);
}

Table read_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Failure("cannot read '" + path + "'");
  Table t;
  std::string line;
  if (!std::getline(f, line)) throw Failure("'" + path + "' is empty");
  t.header = split(line, ',');
  while (std::getline(f, line)) {
    if (line.empty()) continue;
    t.rows.push_back(split(line, ','));
    if (t.rows.back().size() != t.header.size())
      throw Failure("'" + path + "': a row has " + std::to_string(t.rows.back().size()) + " fields, the header " +
                    std::to_string(t.header.size()));
  }
  return t;
}

}  // namespace scaling
