#pragma once
// Save/load of parameters and optimizer state: the .hddp tensor file, format version 1.
//
// Layout (all integers little-endian; values IEEE-754 little-endian):
//   offset  size  field
//   0       4     magic "HDDP"
//   4       4     u32 format version = 1
//   8       8     u64 total file size in bytes (checksum included): detects truncation
//   16      4     u32 dtype: 1 = float32, 2 = float64 (every tensor has this dtype)
//   20      4     u32 number of tensors NT
//   24      4     u32 number of metadata entries NM
//   28      4     u32 flags, 0 in version 1
//   32      ...   NT tensor descriptors: u32 name length, name bytes (no terminator),
//                 i64 rows, i64 cols
//           ...   NM metadata entries: u32 key length, key bytes, u64 value length, value
//                 bytes (opaque; see encode_u64s). Readers ignore keys they do not know, so
//                 later versions add entries (epoch, RNG states, ...) without a new version.
//                 Keys in use: "hddp.optim.kind", "hddp.optim.steps" (save_state below);
//                 "ckpt.*", a training checkpoint's state and run identity (core/checkpoint.h,
//                 which versions its own entries with "ckpt.version").
//           ...   payload: each tensor's rows*cols values in descriptor order, row-major
//   size-8  8     u64 checksum: FNV-1a 64 (offset basis 0xcbf29ce484222325, prime
//                 0x100000001b3) of every byte before it
//
// Writes go to "<path>.tmp.<pid>" (created exclusively, never through a link planted there),
// are fsync'ed, then renamed over <path> (and the directory fsync'ed): a crash leaves either
// the old file or the new one, never a torn one (write_file_atomic, core/util.h). Training
// checkpoints also keep the previous file (core/checkpoint.h).
// Reads refuse, with hddp::Error naming the file and the problem: a wrong magic, an unknown
// version or flags, a size that differs from the recorded one (truncated or trailing bytes),
// a checksum mismatch, and any descriptor that does not fit the file.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <hddp/core/arena.h>
#include <hddp/core/optim.h>

namespace hddp {

inline constexpr char kFileMagic[4] = {'H', 'D', 'D', 'P'};
inline constexpr uint32_t kFileVersion = 1;

enum class DType : uint32_t { Float32 = 1, Float64 = 2 };
template <class T>
constexpr DType dtype_of() {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8, "float or double");
  return sizeof(T) == 4 ? DType::Float32 : DType::Float64;
}
const char* to_string(DType d);

// Metadata: key -> opaque bytes.
using Meta = std::map<std::string, std::string>;
std::string encode_u64s(const std::vector<uint64_t>& v);  // 8 bytes little-endian each
// Throws hddp::Error naming `what` if the size is not a multiple of 8.
std::vector<uint64_t> decode_u64s(const std::string& bytes, const std::string& what);
// A vector of floats or doubles as bytes (little-endian, as in memory) and back (checkpoint
// records); decode throws hddp::Error naming `what` when the size is not a multiple of the
// value size.
std::string encode_floats(const std::vector<float>& v);
std::vector<float> decode_floats(const std::string& bytes, const std::string& what);
std::string encode_doubles(const std::vector<double>& v);
std::vector<double> decode_doubles(const std::string& bytes, const std::string& what);

// Generic level: any named tensors of one dtype plus metadata.
struct TensorRef {
  std::string name;
  int64_t rows = 0, cols = 0;
  const void* data = nullptr;  // rows*cols values of the file's dtype
};
struct TensorData {
  std::string name;
  int64_t rows = 0, cols = 0;
  std::vector<unsigned char> bytes;  // rows*cols values, raw
};
struct TensorFile {
  DType dtype = DType::Float32;
  std::vector<TensorData> tensors;
  Meta meta;
};
// Throws std::invalid_argument for duplicate/empty names or negative shapes, hddp::Error if
// the file cannot be written.
void write_tensor_file(const std::string& path, DType dtype, const std::vector<TensorRef>& tensors,
                       const Meta& meta);
// The file's bytes, as write_tensor_file writes them (path only names it in messages).
std::string encode_tensor_file(const std::string& path, DType dtype, const std::vector<TensorRef>& tensors,
                               const Meta& meta);
TensorFile read_tensor_file(const std::string& path);
// The same from the file's bytes, already read (path only names it in messages): a file read
// once and sent to every rank parses the same everywhere.
TensorFile parse_tensor_file(const std::string& bytes, const std::string& path);

// Model level. save_state writes one tensor per arena view (its name and shape), then, with
// an optimizer, one tensor "optim.<buffer>" of shape 1 x n per optimizer state buffer, and
// metadata "hddp.optim.kind" (text) and "hddp.optim.steps" (encode_u64s). `extra` adds
// metadata entries; keys starting with "hddp." are reserved (throws).
template <class T>
void save_state(const std::string& path, const ParamArena<T>& params, Optimizer<T>* opt = nullptr,
                const Meta& extra = {});
// The bytes save_state writes (path only names it in messages).
template <class T>
std::string encode_state(const std::string& path, const ParamArena<T>& params, Optimizer<T>* opt = nullptr,
                         const Meta& extra = {});
// load_state checks everything before touching anything: dtype, every parameter's name and
// shape (no missing or extra ones), and with opt: the kind, the state buffers and their sizes.
// On any mismatch it throws hddp::Error naming the file and the difference, and params/opt
// are unchanged. Without opt the optimizer entries are ignored. extra (optional) receives the
// non-reserved metadata.
template <class T>
void load_state(const std::string& path, ParamArena<T>& params, Optimizer<T>* opt = nullptr,
                Meta* extra = nullptr);
// The same from a file already read by read_tensor_file (path only names it in messages).
template <class T>
void load_state(const TensorFile& file, const std::string& path, ParamArena<T>& params,
                Optimizer<T>* opt = nullptr, Meta* extra = nullptr);

}  // namespace hddp
