#include <hddp/data/idx.h>

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

IdxArray parse_idx(std::string bytes, const std::string& name) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  HDDP_CHECK(bytes.size() >= 4, name << ": not an IDX file: " << bytes.size() << " bytes, shorter than the 4-byte header");
  HDDP_CHECK(b[0] == 0 && b[1] == 0, name << ": not an IDX file: bad magic (the first two bytes must be zero, got "
                                          << int(b[0]) << " " << int(b[1]) << ")");
  HDDP_CHECK(b[2] == 0x08, name << ": IDX type 0x" << std::hex << int(b[2]) << std::dec
                                << " is not unsigned byte (0x08), the only type read here");
  const int ndim = b[3];
  HDDP_CHECK(ndim >= 1 && ndim <= 4, name << ": " << ndim << " dimensions; expected 1 to 4");
  const size_t header = 4 + 4 * size_t(ndim);
  HDDP_CHECK(bytes.size() >= header,
             name << ": truncated header: " << ndim << " dimensions need " << header << " bytes, the file has " << bytes.size());
  IdxArray a;
  uint64_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    const unsigned char* p = b + 4 + 4 * d;
    const uint64_t n = (uint64_t(p[0]) << 24) | (uint64_t(p[1]) << 16) | (uint64_t(p[2]) << 8) | uint64_t(p[3]);
    HDDP_CHECK(n > 0, name << ": dimension " << d << " is zero");
    count *= n;
    HDDP_CHECK(count <= (uint64_t(1) << 40), name << ": dimensions too large (" << count << " values)");
    a.dims.push_back(int64_t(n));
  }
  const uint64_t have = bytes.size() - header;
  HDDP_CHECK(have >= count, name << ": truncated: the dimensions need " << count << " bytes of data, the file has " << have);
  HDDP_CHECK(have == count, name << ": " << (have - count) << " bytes after the " << count << " the dimensions describe");
  bytes.erase(0, header);
  a.data = std::move(bytes);
  return a;
}

std::string read_maybe_gzip(const std::string& path) {
  struct stat st{};
  HDDP_CHECK(stat(path.c_str(), &st) == 0, path << ": " << std::strerror(errno));
  HDDP_CHECK(S_ISREG(st.st_mode), path << ": not a regular file");
  // A gzip file's last 4 bytes are its uncompressed size mod 2^32 (RFC 1952): reserve that.
  size_t expect = size_t(st.st_size);
  if (FILE* raw = std::fopen(path.c_str(), "rb")) {
    unsigned char m[2] = {0, 0}, t[4];
    if (std::fread(m, 1, 2, raw) == 2 && m[0] == 0x1f && m[1] == 0x8b && st.st_size >= 18 &&
        std::fseek(raw, -4, SEEK_END) == 0 && std::fread(t, 1, 4, raw) == 4)
      expect = size_t(t[0]) | size_t(t[1]) << 8 | size_t(t[2]) << 16 | size_t(t[3]) << 24;
    std::fclose(raw);
  }
  gzFile f = gzopen(path.c_str(), "rb");
  HDDP_CHECK(f, path << ": cannot open: " << std::strerror(errno));
  std::string out;
  out.reserve(expect);
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      const std::string why = gzerror(f, &code);
      gzclose(f);
      HDDP_CHECK(false, path << ": corrupt gzip data: " << why);
    }
    if (n == 0) break;
    out.append(buf, size_t(n));
  }
  // gzread stops without an error at a truncated stream; gzclose_r reports it (Z_BUF_ERROR).
  const int rc = gzclose_r(f);
  HDDP_CHECK(rc == Z_OK, path << ": truncated or corrupt gzip stream (zlib error " << rc << ")");
  return out;
}

IdxArray read_idx(const std::string& path) { return parse_idx(read_maybe_gzip(path), path); }

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
                               << "), or give a directory holding the four IDX files (mnist_train --data DIR)");
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
