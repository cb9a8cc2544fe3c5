#include <hddp/core/util.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

#include <hddp/kernels/check.h>

namespace hddp {

void write_file_atomic(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  HDDP_CHECK(fd >= 0, "cannot create '" << tmp << "': " << std::strerror(errno));
  auto fail = [&](const char* what) {
    const int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    HDDP_CHECK(false, "cannot save '" << path << "': " << what << " failed: " << std::strerror(e));
  };
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    HDDP_CHECK(false, "cannot save '" << path << "': close failed: " << std::strerror(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    HDDP_CHECK(false, "cannot save '" << path << "': rename from '" << tmp << "' failed: " << std::strerror(e));
  }
  // Make the rename itself durable (best effort: some file systems refuse fsync on a directory).
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

std::string read_file(const std::string& path) {
  struct stat st{};
  HDDP_CHECK(::stat(path.c_str(), &st) == 0, "cannot open '" << path << "': " << std::strerror(errno));
  HDDP_CHECK(S_ISREG(st.st_mode), "cannot read '" << path << "': not a regular file");
  std::ifstream f(path, std::ios::binary);
  HDDP_CHECK(f, "cannot open '" << path << "': " << std::strerror(errno));
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  HDDP_CHECK(!f.bad(), "cannot read '" << path << "'");
  return bytes;
}

bool file_exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}
double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t from = 0;
  for (size_t at; (at = s.find(sep, from)) != std::string::npos; from = at + 1) out.push_back(s.substr(from, at - from));
  out.push_back(s.substr(from));
  return out;
}

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& what, uint64_t limit) {
  uint64_t r = 0;
  HDDP_CHECK(!__builtin_mul_overflow(a, b, &r) && r <= limit,
             what << ": " << a << " x " << b << " overflows (more than " << limit << ")");
  return r;
}

uint64_t checked_add(uint64_t a, uint64_t b, const std::string& what, uint64_t limit) {
  uint64_t r = 0;
  HDDP_CHECK(!__builtin_add_overflow(a, b, &r) && r <= limit,
             what << ": " << a << " + " << b << " overflows (more than " << limit << ")");
  return r;
}

int64_t checked_product(const std::vector<int64_t>& dims, const std::string& what, uint64_t limit) {
  uint64_t n = 1;
  for (int64_t d : dims) {
    HDDP_CHECK(d >= 0, what << ": negative dimension " << d);
    n = checked_mul(n, uint64_t(d), what, std::min<uint64_t>(limit, uint64_t(INT64_MAX)));
  }
  return int64_t(n);
}

std::string quote_input(std::string_view s, size_t max_bytes) {
  static const char* hex = "0123456789abcdef";
  std::string q = "'";
  const size_t n = std::min(s.size(), max_bytes);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      q += char(c);
    } else {
      q += "\\x";
      q += hex[c >> 4];
      q += hex[c & 15];
    }
  }
  q += "'";
  if (n < s.size()) q += "... (" + std::to_string(s.size()) + " bytes)";
  return q;
}

}  // namespace hddp
