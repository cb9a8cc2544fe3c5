#pragma once
// Weights in the safetensors format (https://github.com/huggingface/safetensors), which PyTorch
// and its ecosystem read and write:
//   bytes 0-7   u64 little-endian N: the length of the header
//   bytes 8..   N bytes of JSON: {"<name>": {"dtype": "F32", "shape": [out, in],
//               "data_offsets": [begin, end]}, ..., "__metadata__": {"<key>": "<text>"}}
//               (offsets relative to the data that follows; trailing spaces pad it)
//   then        the data: every tensor's values, little-endian, row-major, no gaps or overlaps
// hddp writes a Sequential's parameters under the names PyTorch gives the same nn.Sequential
// ("0.weight" out x in, "0.bias" of shape [out], "1.weight", ...), as F32.
//
// Errors: parse_safetensors throws hddp::Error naming the file and the problem for any bytes
// that are not a well-formed file: shorter than 8 bytes, a header length past the end, a header
// that is not a JSON object or nests deeper than one, an entry without dtype/shape/data_offsets,
// more than 16 dimensions (an array of more than 64 items anywhere), more than 2^22 JSON values,
// an unknown dtype, offsets that do not match the shape, overlap, leave gaps or run past the
// end. Names and values are quoted in messages, cut to 60 bytes. load_weights
// throws hddp::Error for a missing, extra or differently shaped tensor or a dtype other than
// F32, and changes nothing then. Nothing else is thrown for any file contents
// (a fuzz test checks it on thousands of mutated files).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/arena.h>

namespace hddp {

struct SafeTensor {
  std::string name;
  std::string dtype;           // "F32", "F64", "F16", "BF16", "I64", ... as in the file
  std::vector<int64_t> shape;  // empty: a scalar
  std::string data;            // the raw little-endian bytes
};
struct SafeTensors {
  std::vector<SafeTensor> tensors;            // in file order of their data
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// The file's bytes. Throws std::invalid_argument for duplicate or empty names, a name
// "__metadata__", or data whose size does not match dtype and shape.
std::string encode_safetensors(const SafeTensors& st);
SafeTensors parse_safetensors(const std::string& bytes, const std::string& path);

// The parameters of `params` (one tensor per view; a view of shape n x 1 named "*.bias" is
// written as the 1-D [n] PyTorch uses) plus `metadata`, atomically to path.
void save_weights(const std::string& path, const ParamArena<float>& params,
                  const std::map<std::string, std::string>& metadata);
// Copies the file's tensors into params after checking that they are exactly the arena's
// views: every name, shape (a bias as [n] or [n, 1]) and dtype F32. All or nothing.
void load_weights(const SafeTensors& st, const std::string& path, ParamArena<float>& params);

}  // namespace hddp
