#pragma once
// Log lines that never stall training.
//
// A launcher that stops reading its ranks' output makes a rank that writes to it block in
// write(). mpiexec, told to stop with SIGTERM, sleeps through odls_base_sigkill_timeout without
// draining the ranks' stdout (a pty here: a few KiB) before it passes SIGTERM on; a terminal
// paused with Ctrl-S does the same. A rank blocked in printf never reaches the step where it
// notices the signal and checkpoints. So the per-epoch lines go through a LineLog: written as
// far as the stream takes them without waiting, through a second, non-blocking opening of the
// same pipe or terminal (/proc/self/fd/N: O_NONBLOCK there leaves the program's own stdout
// blocking), the rest kept in memory (up to 1 MiB, then counted and dropped) and written when
// the stream takes it again. A regular file never blocks and is written directly; where the
// second opening is refused (a socket), poll() decides, a chunk at a time. flush() writes the
// rest, blocking: call it when training is over. Keep what must not be lost in files (a
// metrics table, a loss history), not only in these lines.
//
// eta() words the time left for a progress line.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace hddp {

// "ETA 12 s", "ETA 3 min 20 s", "ETA 1 h 05 min": the time `left` steps take at the rate of
// `done` steps in `elapsed_s` seconds ("ETA ?" before the first).
inline std::string eta(double elapsed_s, int64_t done, int64_t left) {
  if (done <= 0 || !(elapsed_s >= 0)) return "ETA ?";
  const double s = elapsed_s / double(done) * double(left);
  char b[64];
  if (s < 60) std::snprintf(b, sizeof b, "ETA %.0f s", s);
  else if (s < 3600) std::snprintf(b, sizeof b, "ETA %d min %02d s", int(s / 60), int(std::fmod(s, 60)));
  else std::snprintf(b, sizeof b, "ETA %d h %02d min", int(s / 3600), int(std::fmod(s, 3600) / 60));
  return b;
}

class LineLog {
 public:
  explicit LineLog(FILE* f) : f_(f) {
    struct stat st{};
    if (fstat(fileno(f_), &st) == 0 && !S_ISREG(st.st_mode)) {
      char path[64];
      std::snprintf(path, sizeof path, "/proc/self/fd/%d", fileno(f_));
      nb_fd_ = ::open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);  // -1: poll() instead
    }
  }
  ~LineLog() {
    if (nb_fd_ >= 0) ::close(nb_fd_);
  }
  LineLog(const LineLog&) = delete;
  LineLog& operator=(const LineLog&) = delete;

  void line(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (pending_.size() - head_ > kCap) {
      ++dropped_;
      return;
    }
    pending_.append(buf, std::min<size_t>(size_t(n), sizeof buf - 1));
    drain(/*block=*/false);
  }

  // Writes every pending line (blocking), and says how many were dropped.
  void flush() {
    drain(/*block=*/true);
    if (dropped_ > 0) {
      std::fprintf(f_, "(%ld log lines dropped: the output was not read for a while)\n", dropped_);
      std::fflush(f_);
      dropped_ = 0;
    }
  }

 private:
  static constexpr size_t kCap = size_t(1) << 20;  // bytes kept while the stream is blocked
  static constexpr size_t kChunk = 1024;           // bytes per write after a poll

  bool writable() const {
    pollfd p{fileno(f_), POLLOUT, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
  }

  void drain(bool block) {
    std::fflush(f_);  // whatever went through stdio first stays first
    const bool nonblocking = !block && nb_fd_ >= 0;
    while (head_ < pending_.size() && (block || nonblocking || writable())) {
      const size_t n = block || nonblocking ? pending_.size() - head_ : std::min(kChunk, pending_.size() - head_);
      const ssize_t w = ::write(nonblocking ? nb_fd_ : fileno(f_), pending_.data() + head_, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // full (EAGAIN), closed or failing: kept, or lost either way
      head_ += size_t(w);
    }
    if (head_ == pending_.size() || head_ >= (size_t(64) << 10)) {
      pending_.erase(0, head_);
      head_ = 0;
    }
  }

  FILE* f_;
  int nb_fd_ = -1;  // the same stream opened again with O_NONBLOCK (pipes, terminals)
  std::string pending_;
  size_t head_ = 0;  // pending_[0, head_) is written
  long dropped_ = 0;
};

}  // namespace hddp
