#pragma once
// Log lines that never stall training.
//
// A launcher that stops reading its ranks' output makes a rank that writes to it block in
// write(). mpiexec, told to stop with SIGTERM, sleeps through odls_base_sigkill_timeout without
// draining the ranks' stdout (a pty here: a few KiB) before it passes SIGTERM on; a terminal
// paused with Ctrl-S does the same. A rank blocked in printf never reaches the step where it
// notices the signal and checkpoints. So the per-epoch lines go through a LineLog: written
// while the stream takes them (poll says writable, and at most 1 KiB at a time, less than a
// pipe's or a pty's free space then), otherwise kept in memory (up to 1 MiB, then counted and
// dropped) and written when the stream takes them again. flush() writes the rest, blocking:
// call it when training is over. loss.csv holds every loss, whatever happens to these lines.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace hddp::drivers {

class LineLog {
 public:
  explicit LineLog(FILE* f) : f_(f) {}
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
    while (head_ < pending_.size() && (block || writable())) {
      const size_t n = block ? pending_.size() - head_ : std::min(kChunk, pending_.size() - head_);
      const ssize_t w = ::write(fileno(f_), pending_.data() + head_, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;  // closed or failing stream: the lines are lost either way
      head_ += size_t(w);
    }
    if (head_ == pending_.size() || head_ >= (size_t(64) << 10)) {
      pending_.erase(0, head_);
      head_ = 0;
    }
  }

  FILE* f_;
  std::string pending_;
  size_t head_ = 0;  // pending_[0, head_) is written
  long dropped_ = 0;
};

}  // namespace hddp::drivers
