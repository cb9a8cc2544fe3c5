#pragma once
// HDDP_CHECK(cond, message-stream): throws hddp::Error (or a chosen exception type) carrying
// file:line and the message. Used at API boundaries, never inside hot loops.
#include <sstream>
#include <stdexcept>
#include <string>

namespace hddp {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] inline void throw_at(const char* file, int line, const std::string& msg,
                                  bool invalid_argument) {
  std::string s = std::string(file) + ":" + std::to_string(line) + ": " + msg;
  if (invalid_argument) throw std::invalid_argument(s);
  throw Error(s);
}
}  // namespace detail

// The message of an error thrown by HDDP_CHECK without its "file.cpp:123: " prefix: what a user
// is shown (the prefix is for developers).
inline std::string user_message(const std::string& what) {
  const size_t p = what.find(".cpp:");
  if (p == std::string::npos) return what;
  const size_t q = what.find(": ", p + 5);
  return q == std::string::npos ? what : what.substr(q + 2);
}
}  // namespace hddp

// HDDP_CHECK(x > 0, "x must be positive, got " << x);  throws hddp::Error
// HDDP_CHECK_ARG(...): the same, but throws std::invalid_argument (bad arguments to a public
// function).
#define HDDP_CHECK(cond, msg) HDDP_CHECK_IMPL_(cond, msg, false)
#define HDDP_CHECK_ARG(cond, msg) HDDP_CHECK_IMPL_(cond, msg, true)

#define HDDP_CHECK_IMPL_(cond, msg, invalid_argument)                                       \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::ostringstream hddp_check_os_;                                                    \
      hddp_check_os_ << msg;                                                                \
      ::hddp::detail::throw_at(__FILE__, __LINE__, hddp_check_os_.str(), invalid_argument); \
    }                                                                                       \
  } while (0)
