#include <hddp/data/idx.h>

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include <hddp/core/layer.h>
#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

namespace {

// The most data an IDX file may describe (1 TiB), whatever its dimensions say.
constexpr uint64_t kMaxIdxBytes = uint64_t(1) << 40;
// Deflate's largest expansion is 1032:1 (RFC 1951: a 258-byte match in about 2 bits): a gzip of
// S bytes cannot hold more than this, so a header that claims more is refused before any read.
constexpr uint64_t kMaxDeflateRatio = 1032;

// The header: magic, type, dimensions (each > 0, their product checked). `b` holds at least 4
// bytes; `more` reads the dimensions' bytes (4 x ndim) into dims_bytes.
struct IdxHeader {
  std::vector<int64_t> dims;
  uint64_t count = 0;   // product of dims: the data's bytes
  size_t size = 0;      // bytes of the header: 4 + 4 x ndim
};

// The first 4 bytes: magic and type checked; returns the number of dimensions.
int idx_ndim(const unsigned char* b, const std::string& name) {
  HDDP_CHECK(b[0] == 0 && b[1] == 0, name << ": not an IDX file: bad magic (the first two bytes must be zero, got "
                                          << int(b[0]) << " " << int(b[1]) << ")");
  HDDP_CHECK(b[2] == 0x08, name << ": IDX type 0x" << std::hex << int(b[2]) << std::dec
                                << " is not unsigned byte (0x08), the only type read here");
  const int ndim = b[3];
  HDDP_CHECK(ndim >= 1 && ndim <= 4, name << ": " << ndim << " dimensions; expected 1 to 4");
  return ndim;
}

// The dimensions (4 x ndim big-endian bytes at p), each > 0, their product at most kMaxIdxBytes.
IdxHeader idx_dims(const unsigned char* p, int ndim, const std::string& name) {
  IdxHeader h;
  h.size = 4 + 4 * size_t(ndim);
  for (int d = 0; d < ndim; ++d, p += 4) {
    const uint64_t n = (uint64_t(p[0]) << 24) | (uint64_t(p[1]) << 16) | (uint64_t(p[2]) << 8) | uint64_t(p[3]);
    HDDP_CHECK(n > 0, name << ": dimension " << d << " is zero");
    h.dims.push_back(int64_t(n));
  }
  h.count = uint64_t(checked_product(h.dims, name + ": dimensions " + to_string(h.dims), kMaxIdxBytes));
  return h;
}

void check_data_size(const IdxHeader& h, uint64_t have, const std::string& name) {
  HDDP_CHECK(have >= h.count, name << ": truncated: the dimensions need " << h.count << " bytes of data, the file has " << have);
  HDDP_CHECK(have == h.count, name << ": " << (have - h.count) << " bytes after the " << h.count << " the dimensions describe");
}

// A string of n bytes, or an hddp::Error naming the file (a node with a memory cap).
std::string allocate(uint64_t n, const std::string& name) {
  try {
    return std::string(size_t(n), '\0');
  } catch (const std::bad_alloc&) {
    HDDP_CHECK(false, name << ": cannot allocate " << n << " bytes for its data (out of memory)");
  }
}

// Reads up to n bytes (gzread takes at most INT_MAX a call); returns the bytes read.
uint64_t gz_read_all(gzFile f, char* out, uint64_t n, const std::string& path) {
  uint64_t done = 0;
  while (done < n) {
    const unsigned chunk = unsigned(std::min<uint64_t>(n - done, uint64_t(1) << 30));
    const int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      HDDP_CHECK(false, path << ": corrupt gzip data: " << why);
    }
    if (got == 0) break;
    done += uint64_t(got);
  }
  return done;
}

// Closes f on every path out.
struct GzFile {
  gzFile f;
  explicit GzFile(const std::string& path) : f(gzopen(path.c_str(), "rb")) {
    HDDP_CHECK(f, path << ": cannot open: " << std::strerror(errno));
  }
  ~GzFile() {
    if (f) gzclose_r(f);
  }
  // gzread stops without an error at a truncated stream; gzclose_r reports it (Z_BUF_ERROR).
  void close(const std::string& path) {
    const int rc = gzclose_r(f);
    f = nullptr;
    HDDP_CHECK(rc == Z_OK, path << ": truncated or corrupt gzip stream (zlib error " << rc << ")");
  }
};

// stat: a regular file; its size, and whether it starts with the gzip magic.
uint64_t regular_file_size(const std::string& path, bool* gzip) {
  struct stat st{};
  HDDP_CHECK(stat(path.c_str(), &st) == 0, path << ": " << std::strerror(errno));
  HDDP_CHECK(S_ISREG(st.st_mode), path << ": not a regular file");
  *gzip = false;
  if (FILE* raw = std::fopen(path.c_str(), "rb")) {
    unsigned char m[2] = {0, 0};
    *gzip = std::fread(m, 1, 2, raw) == 2 && m[0] == 0x1f && m[1] == 0x8b;
    std::fclose(raw);
  }
  return uint64_t(st.st_size);
}

}  // namespace

IdxArray parse_idx(std::string bytes, const std::string& name) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  HDDP_CHECK(bytes.size() >= 4, name << ": not an IDX file: " << bytes.size() << " bytes, shorter than the 4-byte header");
  const int ndim = idx_ndim(b, name);
  HDDP_CHECK(bytes.size() >= 4 + 4 * size_t(ndim),
             name << ": truncated header: " << ndim << " dimensions need " << 4 + 4 * ndim << " bytes, the file has " << bytes.size());
  IdxHeader h = idx_dims(b + 4, ndim, name);
  check_data_size(h, bytes.size() - h.size, name);
  bytes.erase(0, h.size);
  return IdxArray{std::move(h.dims), std::move(bytes)};
}

std::string read_maybe_gzip(const std::string& path, uint64_t max_bytes) {
  bool gzip = false;
  const uint64_t file_size = regular_file_size(path, &gzip);
  GzFile f(path);
  // Grows by doubling up to max_bytes: nothing is reserved that a size in the file claims.
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const uint64_t n = gz_read_all(f.f, buf, sizeof buf, path);
    HDDP_CHECK(out.size() + n <= max_bytes, path << ": more than " << max_bytes << " bytes "
                                                 << (gzip ? "once decompressed" : "") << " (the file has " << file_size << ")");
    out.append(buf, size_t(n));
    if (n < sizeof buf) break;
  }
  f.close(path);
  return out;
}

IdxArray read_idx(const std::string& path) {
  bool gzip = false;
  const uint64_t file_size = regular_file_size(path, &gzip);
  GzFile f(path);  // zlib reads a plain file as it is
  // The header first: 4 bytes, then 4 per dimension.
  unsigned char head[4 + 4 * 255];
  const uint64_t got = gz_read_all(f.f, reinterpret_cast<char*>(head), 4, path);
  HDDP_CHECK(got == 4, path << ": not an IDX file: " << got << " bytes, shorter than the 4-byte header");
  const int ndim = idx_ndim(head, path);
  const uint64_t got_dims = gz_read_all(f.f, reinterpret_cast<char*>(head + 4), 4 * uint64_t(ndim), path);
  HDDP_CHECK(got_dims == 4 * uint64_t(ndim), path << ": truncated header: " << ndim << " dimensions need " << 4 + 4 * ndim
                                                  << " bytes, the file has " << 4 + got_dims);
  IdxHeader h = idx_dims(head + 4, ndim, path);
  // The size the header announces, checked against the file before anything is allocated.
  if (!gzip) {
    check_data_size(h, file_size - h.size, path);
  } else {
    HDDP_CHECK(h.count <= kMaxDeflateRatio * file_size,
               path << ": the dimensions " << to_string(h.dims) << " need " << h.count << " bytes, more than a gzip file of "
                    << file_size << " bytes can hold (truncated, or not this file's header)");
  }
  IdxArray a{std::move(h.dims), allocate(h.count, path)};
  const uint64_t have = gz_read_all(f.f, a.data.data(), h.count, path);
  HDDP_CHECK(have == h.count, path << ": truncated" << (gzip ? " or corrupt gzip stream" : "") << ": the dimensions need "
                                    << h.count << " bytes of data, the file has " << have);
  // Decompression stops at the announced size: one byte more is an error, not more inflating.
  char extra = 0;
  HDDP_CHECK(gz_read_all(f.f, &extra, 1, path) == 0,
             path << ": data after the " << h.count << " bytes the dimensions describe");
  f.close(path);
  return a;
}

Dataset read_idx_dataset(const std::string& images_path, const std::string& labels_path) {
  IdxArray im = read_idx(images_path);
  const IdxArray lb = read_idx(labels_path);
  HDDP_CHECK(im.dims.size() == 3, images_path << ": images must have 3 dimensions (count, rows, columns), this file has "
                                              << im.dims.size());
  HDDP_CHECK(lb.dims.size() == 1, labels_path << ": labels must have 1 dimension, this file has " << lb.dims.size());
  HDDP_CHECK(lb.dims[0] == im.dims[0], labels_path << ": " << lb.dims[0] << " labels for the " << im.dims[0]
                                                   << " images of " << images_path);
  Dataset d;
  d.count = im.dims[0];
  d.shape = {1, im.dims[1], im.dims[2]};
  d.x_bytes = std::move(im.data);
  d.labels.resize(size_t(d.count));
  for (size_t i = 0; i < d.labels.size(); ++i) {
    d.labels[i] = static_cast<unsigned char>(lb.data[i]);
    d.num_classes = std::max(d.num_classes, d.labels[i] + 1);
  }
  return d;
}

namespace {

// DIR/NAME.gz, else DIR/NAME.
std::string find_mnist_file(const std::string& dir, const std::string& name) {
  for (const std::string& p : {dir + "/" + name + ".gz", dir + "/" + name})
    if (file_exists(p)) return p;
  HDDP_CHECK(file_exists(dir), "read_mnist: no directory '" << dir << "'. Fashion-MNIST comes with the Debian package "
                               "dataset-fashion-mnist (apt-get install dataset-fashion-mnist: " << kFashionMnistDir
                               << "), or give the directory that holds the four IDX files");
  HDDP_CHECK(false, "read_mnist: no '" << name << ".gz' or '" << name << "' in '" << dir << "' (the four IDX files of "
                    "Fashion-MNIST or MNIST: train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-...)");
}

}  // namespace

Dataset read_mnist(const std::string& dir, const std::string& split) {
  HDDP_CHECK_ARG(split == "train" || split == "test", "read_mnist: split '" << split << "' is not 'train' or 'test'");
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::string ipath = find_mnist_file(dir, prefix + "-images-idx3-ubyte");
  const std::string lpath = find_mnist_file(dir, prefix + "-labels-idx1-ubyte");
  Dataset d = read_idx_dataset(ipath, lpath);
  constexpr int kClasses = 10;
  for (size_t i = 0; i < d.labels.size(); ++i)
    HDDP_CHECK(d.labels[i] < kClasses, lpath << ": label " << d.labels[i] << " of image " << i << " is outside [0, " << kClasses << ")");
  d.num_classes = kClasses;
  return d;
}

}  // namespace hddp
