#pragma once
// NumPy .npy files, format versions 1.0, 2.0 and 3.0
// (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html): the magic
// "\x93NUMPY", the version, the header length (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0),
// a header that is a Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)}
// padded with spaces and ended by '\n', then the data in C order.
//
// Read: the dtypes '<f4', '<f8', '|u1', '<i4', '<i8' in C order. Refused, with hddp::Error naming
// the file: a bad magic, another version, a malformed header (anything but those three keys once
// each, in Python literal syntax as numpy writes it), fortran_order True, another dtype
// (big-endian, complex, structured, ...), more than 64 dimensions, a shape whose size in bytes
// overflows int64, data shorter or longer than the shape says (sizes are checked against the
// bytes present before anything is allocated; messages quote at most 200 bytes of a header).
#include <cstdint>
#include <string>
#include <vector>

#include <hddp/data/dataset.h>

namespace hddp {

struct NpyArray {
  std::string dtype;           // "<f4", "<f8", "|u1", "<i4" or "<i8"
  std::vector<int64_t> shape;  // () for a scalar
  std::string bytes;           // the data, prod(shape) x itemsize bytes, C order
};

NpyArray read_npy(const std::string& path);

// X of shape (N, ...) and y of shape (N,) or (N, k): the data set of N samples of shape (...)
// ((N,) gives shape {1}). X float32 or float64 (converted to float) or uint8 (kept as bytes,
// byte_scale 1/255). labels = false: y float32 or float64, regression targets; labels = true:
// y of shape (N,), uint8, int32 or int64, all >= 0, num_classes = max + 1. Throws hddp::Error
// naming the file for another dtype, rank or sample count.
Dataset read_npy_dataset(const std::string& x_path, const std::string& y_path, bool labels);

}  // namespace hddp
