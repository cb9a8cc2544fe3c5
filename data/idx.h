#pragma once
// IDX files (the MNIST / Fashion-MNIST format, http://yann.lecun.com/exdb/mnist/): two zero
// bytes, a type byte (0x08: unsigned byte, the only type read here), the number of dimensions,
// then each dimension as a big-endian uint32, then the data in row-major order. The files may be
// gzip'd; zlib reads both forms. read_idx_dataset and read_mnist make a Dataset of an images
// file and its labels file (MNIST, Fashion-MNIST and others in the same layout).
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/data/dataset.h>

namespace hddp {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28} for images, {60000} for labels
  std::string data;           // prod(dims) bytes (a string: the file's buffer, reused in place)
};

// Parses an IDX array of unsigned bytes from its (already decompressed) bytes. Throws
// hddp::Error naming `name` and what is wrong: shorter than its header, a bad magic (the first
// two bytes not zero), a type other than unsigned byte, 0 or more than 4 dimensions, a zero
// dimension, dimensions whose product overflows or passes 1 TiB (checked as they are
// multiplied), data shorter (truncated) or longer (trailing bytes) than the dimensions say.
// Takes the bytes over: the header is cut off in place, no second copy of the data.
IdxArray parse_idx(std::string bytes, const std::string& name);

// The file's bytes, gunzip'd through zlib when it is gzip'd (a plain file passes through).
// Throws hddp::Error naming the path: missing or unreadable, a corrupt or truncated gzip
// stream, more than max_bytes of output (decompression stops there: a gzip bomb costs
// max_bytes, not its whole output). Nothing is reserved from a size the file claims.
std::string read_maybe_gzip(const std::string& path, uint64_t max_bytes);

// One IDX file, plain or gzip'd, read in bounded time and memory: the header first, its size
// checked (the plain file's size must match it; a gzip cannot claim more than deflate's
// 1032:1 can hold), then exactly that many bytes inflated into one buffer allocated once, and
// one byte more refused without inflating the rest. Errors as parse_idx, naming the path; an
// allocation the machine refuses is an hddp::Error too.
IdxArray read_idx(const std::string& path);

// Images (count, rows, columns) and their labels (count): shape {1, rows, columns}, the pixels
// kept as bytes (byte_scale 1/255), num_classes = max label + 1. Throws hddp::Error naming the
// file: images that are not 3-dimensional, labels not 1-dimensional or not one per image.
Dataset read_idx_dataset(const std::string& images_path, const std::string& labels_path);

// Where Debian's dataset-fashion-mnist package puts Fashion-MNIST.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// One split of MNIST or Fashion-MNIST: split "train" or "test" reads
// DIR/{train,t10k}-images-idx3-ubyte and -labels-idx1-ubyte, each NAME.gz if there, else NAME.
// num_classes is 10. Throws hddp::Error naming the file: missing (a missing directory names the
// Debian package dataset-fashion-mnist), malformed (as read_idx_dataset), a label outside [0, 10).
Dataset read_mnist(const std::string& dir, const std::string& split);

}  // namespace hddp
