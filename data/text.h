#pragma once
// Text as training data for language models: byte-level tokens (each byte one token, vocabulary
// 256) from text files, a token file format for corpora tokenised elsewhere, a train/validation
// split, and the random windows each rank trains on.
//
//   const auto files = text_files_in(kFortunesDir);        // Debian's fortunes, no .dat / .u8
//   TokenSplit s = split_tokens(read_text_tokens(files), 0.1);
//   WindowSampler train(s.train, /*T=*/64, seed);
//   train.fill(step, rank * B, B, x, y);                     // B windows: x tokens, y the next ones
//
// Token file (".tok"), little-endian, 32-byte header then the tokens:
//   bytes 0-7    magic "HDDPTOK1"
//   8-11         uint32 version (1)
//   12-15        uint32 vocabulary size V (1 .. 65536): every token < V
//   16-23        uint64 token count n
//   24-27        uint32 CRC-32 (zlib's) of the n * 2 token bytes
//   28-31        uint32 reserved, 0
//   32-          n uint16 tokens
// A file of another size, a bad magic or version, a token >= V or a CRC that does not match is
// refused with an hddp::Error naming the file and what is wrong.
#include <cstdint>
#include <string>
#include <vector>

namespace hddp {

// Where Debian's fortunes package puts its text.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";

// The text files of a folder: its regular files (links followed), without the strfile indexes
// and UTF-8 copies fortune keeps beside them (".dat", ".u8"), sorted by name. Throws hddp::Error
// when the folder is missing (naming Debian's fortunes package for the default) or holds none.
std::vector<std::string> text_files_in(const std::string& dir);

// The bytes of the files, in order, as tokens (one per byte). Throws hddp::Error naming a file
// that cannot be read.
std::vector<uint16_t> read_text_tokens(const std::vector<std::string>& paths);

struct TokenFile {
  uint32_t vocab = 0;
  std::vector<uint16_t> tokens;
};
// Throws hddp::Error naming `name` and the fault (see the format above).
TokenFile parse_token_file(const std::string& bytes, const std::string& name);
TokenFile read_token_file(const std::string& path);
// Writes atomically (a temporary file renamed); throws hddp::Error where it cannot, or for
// tokens >= vocab.
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens, uint32_t vocab);

// The first 1 - val_fraction of the tokens train, the rest validates (nanoGPT's split).
// val_fraction in [0, 1).
struct TokenSplit {
  std::vector<uint16_t> train, val;
};
TokenSplit split_tokens(const std::vector<uint16_t>& tokens, double val_fraction);

// Random windows of T + 1 consecutive tokens: x the first T, y the T after them (next-token
// targets). Window g of step s starts at a position drawn from (seed, s, g) alone, so a rank
// taking windows [r B, (r + 1) B) of a step gets exactly what one rank of batch (ranks x B) gets
// there: the data do not depend on the rank count, and a resumed run draws the same windows.
class WindowSampler {
 public:
  // Throws hddp::Error when the tokens are fewer than T + 1 (one window), naming both.
  WindowSampler(const std::vector<uint16_t>& tokens, int64_t T, uint64_t seed, const std::string& what = "the text");
  // Windows [first, first + count) of `step`: x and y, count x T values each.
  void fill(int64_t step, int64_t first, int64_t count, float* x, int32_t* y) const;
  int64_t windows() const { return int64_t(tokens_.size()) - T_; }  // distinct start positions

 private:
  const std::vector<uint16_t>& tokens_;
  int64_t T_;
  uint64_t seed_;
};

}  // namespace hddp
