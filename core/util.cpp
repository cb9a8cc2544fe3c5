#include <hddp/core/util.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <thread>
#include <utility>

#include <hddp/kernels/check.h>

namespace hddp {

namespace {

// The directory of path ("." for a bare name) and the name in it.
std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Creates `tmp` exclusively, never through anything planted there (see write_file_atomic).
int create_exclusive(const std::string& tmp) {
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::open(tmp.c_str(), kFlags, 0644);
  if (fd < 0 && errno == EEXIST) {
    struct stat st{};
    HDDP_CHECK(::lstat(tmp.c_str(), &st) == 0, "cannot create '" << tmp << "': " << std::strerror(errno));
    HDDP_CHECK(S_ISREG(st.st_mode), "cannot create '" << tmp << "': a "
                                        << (S_ISLNK(st.st_mode) ? "symbolic link" : S_ISDIR(st.st_mode) ? "directory" : "non-regular file")
                                        << " of that name exists; it is not ours, so it is left as it is");
    // A regular file: a killed process of the same pid left it. unlink never follows a link,
    // and whatever appears there meanwhile makes O_EXCL fail again.
    HDDP_CHECK(::unlink(tmp.c_str()) == 0 || errno == ENOENT,
               "cannot remove the stale '" << tmp << "': " << std::strerror(errno));
    fd = ::open(tmp.c_str(), kFlags, 0644);
  }
  HDDP_CHECK(fd >= 0, "cannot create '" << tmp << "': " << std::strerror(errno));
  return fd;
}

bool write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w, n -= size_t(w);
  }
  return true;
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes, const AtomicWriteOptions& o) {
  if (o.remove_stale) remove_stale_temporaries(path, false);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = create_exclusive(tmp);
  auto fail = [&](const std::string& what, int e, bool close_fd) {
    if (close_fd) ::close(fd);
    ::unlink(tmp.c_str());
    HDDP_CHECK(false, "cannot save '" << path << "': " << what << " failed: " << std::strerror(e));
  };
  const size_t half = bytes.size() / 2;
  if (!write_all(fd, bytes.data(), half)) fail("write", errno, true);
  if (o.at) o.at("partial");
  if (!write_all(fd, bytes.data() + half, bytes.size() - half)) fail("write", errno, true);
  int rc;
  while ((rc = ::fsync(fd)) != 0 && errno == EINTR) {
  }
  if (rc != 0) fail("fsync", errno, true);
  // EINTR from close: Linux has released the descriptor already (retrying could close another
  // thread's new one), and fsync has put the data on disk: closed.
  if (::close(fd) != 0 && errno != EINTR) fail("close", errno, false);
  if (!o.keep_previous.empty() && ::rename(path.c_str(), o.keep_previous.c_str()) != 0 && errno != ENOENT) {
    const int e = errno;
    fail("rename to '" + o.keep_previous + "'", e, false);
  }
  if (o.at) o.at("rotated");
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    fail("rename from '" + tmp + "'", e, false);
  }
  // Make the renames durable (best effort: some file systems refuse fsync on a directory).
  const int dfd = ::open(split_path(path).first.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<std::string> remove_stale_temporaries(const std::string& path, bool include_own) {
  const auto [dir, name] = split_path(path);
  const std::string prefix = name + ".tmp.", own = prefix + std::to_string(::getpid());
  std::vector<std::string> removed;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return removed;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.size() <= prefix.size() || n.compare(0, prefix.size(), prefix) != 0) continue;
    if (n.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    if (n == own && !include_own) continue;
    stale.push_back(n);
  }
  ::closedir(d);
  for (const std::string& n : stale) {
    const std::string p = dir + "/" + n;
    struct stat st{};
    if (::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(p.c_str()) == 0) removed.push_back(p);
  }
  return removed;
}

void test_pause(const char* point) {
  const char* spec = std::getenv("HDDP_TEST_PAUSE");
  if (!spec) return;
  const std::vector<std::string> f = split(spec, ':');
  if (f.size() < 3 || f[0] != point) return;
  static std::map<std::string, long> reached;  // per point: how often this process got there
  if (++reached[point] != std::atol(f[1].c_str())) return;
  std::string marker = f[2];
  for (size_t i = 3; i < f.size(); ++i) marker += ":" + f[i];
  write_file_atomic(marker, std::to_string(::getpid()) + "\n");
  while (file_exists(marker)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
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

std::string file_creation_error(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (access(dir.c_str(), W_OK | X_OK) == 0) return "";
  return "cannot write into directory '" + dir + "': " + std::strerror(errno);
}

std::string exact_string(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace hddp
