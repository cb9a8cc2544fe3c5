#pragma once
// IDX files (the MNIST / Fashion-MNIST format, http://yann.lecun.com/exdb/mnist/): two zero
// bytes, a type byte (0x08: unsigned byte, the only type read here), the number of dimensions,
// then each dimension as a big-endian uint32, then the data in row-major order. The files may be
// gzip'd; zlib reads both forms.
#include <cstdint>
#include <string>
#include <vector>

namespace hddp {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28} for images, {60000} for labels
  std::string data;           // prod(dims) bytes (a string: the file's buffer, reused in place)
};

// Parses an IDX array of unsigned bytes from its (already decompressed) bytes. Throws
// hddp::Error naming `name` and what is wrong: shorter than its header, a bad magic (the first
// two bytes not zero), a type other than unsigned byte, 0 or more than 4 dimensions, a zero
// dimension, data shorter (truncated) or longer (trailing bytes) than the dimensions say.
// Takes the bytes over: the header is cut off in place, no second copy of the data.
IdxArray parse_idx(std::string bytes, const std::string& name);

// The file's bytes, gunzip'd through zlib when it is gzip'd (a plain file passes through).
// Throws hddp::Error naming the path: missing or unreadable, a corrupt or truncated gzip stream.
// The buffer is sized once from the gzip trailer (the uncompressed size), not grown by doubling.
std::string read_maybe_gzip(const std::string& path);

// read_maybe_gzip then parse_idx.
IdxArray read_idx(const std::string& path);

}  // namespace hddp
