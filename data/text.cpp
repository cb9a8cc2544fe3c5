#include <hddp/data/text.h>

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <hddp/core/rng.h>
#include <hddp/kernels/check.h>

namespace hddp {

namespace fs = std::filesystem;

namespace {
constexpr char kMagic[8] = {'H', 'D', 'D', 'P', 'T', 'O', 'K', '1'};
constexpr size_t kHeader = 32;

uint32_t get32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | uint8_t(b[at + size_t(i)]);
  return v;
}
uint64_t get64(const std::string& b, size_t at) { return uint64_t(get32(b, at)) | uint64_t(get32(b, at + 4)) << 32; }
void put32(std::string& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(char(v >> (8 * i) & 0xff));
}

uint32_t crc_of(const uint8_t* p, uint64_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes a uInt per call
    const uInt k = uInt(std::min<uint64_t>(n, 1u << 30));
    c = crc32(c, p, k);
    p += k, n -= k;
  }
  return uint32_t(c);
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HDDP_CHECK(in, path << ": cannot open (" << std::strerror(errno) << ")");
  std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  HDDP_CHECK(!in.bad(), path << ": read error");
  return b;
}
}  // namespace

std::vector<std::string> text_files_in(const std::string& dir) {
  std::error_code ec;
  HDDP_CHECK(fs::is_directory(dir, ec), dir << ": no such folder" << (dir == kFortunesDir ? " (install Debian's fortunes package: apt-get install fortunes)" : ""));
  std::vector<std::string> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string ext = e.path().extension().string();
    if (ext == ".dat" || ext == ".u8" || !fs::is_regular_file(e.path(), ec)) continue;
    files.push_back(e.path().string());
  }
  HDDP_CHECK(!ec, dir << ": cannot list (" << ec.message() << ")");
  HDDP_CHECK(!files.empty(), dir << ": holds no text files");
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<uint16_t> read_text_tokens(const std::vector<std::string>& paths) {
  std::vector<uint16_t> t;
  for (const std::string& p : paths) {
    const std::string b = read_all(p);
    t.insert(t.end(), reinterpret_cast<const uint8_t*>(b.data()), reinterpret_cast<const uint8_t*>(b.data()) + b.size());
  }
  return t;
}

TokenFile parse_token_file(const std::string& b, const std::string& name) {
  HDDP_CHECK(b.size() >= kHeader, name << ": not a token file: " << b.size() << " bytes, shorter than the 32-byte header");
  HDDP_CHECK(std::memcmp(b.data(), kMagic, 8) == 0, name << ": not a token file (the magic is not HDDPTOK1)");
  const uint32_t version = get32(b, 8), vocab = get32(b, 12), crc = get32(b, 24);
  const uint64_t n = get64(b, 16);
  HDDP_CHECK(version == 1, name << ": token file version " << version << ", this hddp reads version 1");
  HDDP_CHECK(vocab >= 1 && vocab <= 65536, name << ": vocabulary size " << vocab << " outside [1, 65536]");
  HDDP_CHECK(n <= (b.size() - kHeader) / 2 && kHeader + 2 * n == b.size(),
             name << ": the header announces " << n << " tokens (" << (n <= (uint64_t(1) << 62) ? std::to_string(kHeader + 2 * n) : std::string("too many"))
                  << " bytes), the file has " << b.size() << " bytes (truncated or trailing data)");
  const uint8_t* p = reinterpret_cast<const uint8_t*>(b.data()) + kHeader;
  HDDP_CHECK(crc_of(p, 2 * n) == crc, name << ": the tokens' CRC-32 does not match the header's: the file is damaged");
  TokenFile f;
  f.vocab = vocab;
  f.tokens.resize(size_t(n));
  for (uint64_t i = 0; i < n; ++i) {
    f.tokens[size_t(i)] = uint16_t(p[2 * i] | p[2 * i + 1] << 8);
    HDDP_CHECK(f.tokens[size_t(i)] < vocab, name << ": token " << i << " is " << f.tokens[size_t(i)]
                                                 << ", outside the vocabulary of " << vocab);
  }
  return f;
}

TokenFile read_token_file(const std::string& path) { return parse_token_file(read_all(path), path); }

void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens, uint32_t vocab) {
  HDDP_CHECK(vocab >= 1 && vocab <= 65536, path << ": vocabulary size " << vocab << " outside [1, 65536]");
  std::string b(kMagic, 8);
  put32(b, 1), put32(b, vocab);
  put32(b, uint32_t(tokens.size())), put32(b, uint32_t(uint64_t(tokens.size()) >> 32));
  std::string body;
  body.reserve(2 * tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    HDDP_CHECK(tokens[i] < vocab, path << ": token " << i << " is " << tokens[i] << ", outside the vocabulary of " << vocab);
    body.push_back(char(tokens[i] & 0xff)), body.push_back(char(tokens[i] >> 8));
  }
  put32(b, crc_of(reinterpret_cast<const uint8_t*>(body.data()), body.size())), put32(b, 0);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(b.data(), std::streamsize(b.size())).write(body.data(), std::streamsize(body.size()));
    HDDP_CHECK(out.flush(), tmp << ": cannot write (" << std::strerror(errno) << ")");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  HDDP_CHECK(!ec, path << ": cannot rename " << tmp << " to it (" << ec.message() << ")");
}

TokenSplit split_tokens(const std::vector<uint16_t>& tokens, double val_fraction) {
  HDDP_CHECK_ARG(val_fraction >= 0 && val_fraction < 1, "split_tokens: val_fraction must be in [0, 1), got " << val_fraction);
  const size_t n_train = size_t(double(tokens.size()) * (1 - val_fraction));
  return {{tokens.begin(), tokens.begin() + std::ptrdiff_t(n_train)}, {tokens.begin() + std::ptrdiff_t(n_train), tokens.end()}};
}

WindowSampler::WindowSampler(const std::vector<uint16_t>& tokens, int64_t T, uint64_t seed, const std::string& what)
    : tokens_(tokens), T_(T), seed_(seed) {
  HDDP_CHECK_ARG(T > 0, "WindowSampler: T must be positive, got " << T);
  HDDP_CHECK(int64_t(tokens.size()) >= T + 1, what << " holds " << tokens.size() << " tokens, fewer than one window of "
                                                   << T + 1 << " (the context " << T << " and its next token)");
}

void WindowSampler::fill(int64_t step, int64_t first, int64_t count, float* x, int32_t* y) const {
  const uint64_t starts = uint64_t(windows());
  for (int64_t w = 0; w < count; ++w) {
    uint64_t s = derive_seed(seed_, uint64_t(step), uint64_t(first + w));
    const uint64_t start = splitmix64_next(s) % starts;  // bias below 2^-40 for texts under 2^24 tokens
    const uint16_t* t = tokens_.data() + start;
    for (int64_t i = 0; i < T_; ++i) x[w * T_ + i] = float(t[i]), y[w * T_ + i] = int32_t(t[i + 1]);
  }
}

}  // namespace hddp
