// Every reader of a file against hostile input: IDX (parse_idx, read_maybe_gzip, read_idx),
// .npy (read_npy, read_npy_dataset), CSV (read_csv), .hddp checkpoints (parse_checkpoint,
// restore_checkpoint), safetensors (parse_safetensors, load_weights), token files
// (parse_token_file) and the drivers' --config file (poly::parse_options).
//
// For each reader: valid seeds written here, then deterministic mutations of them (bit flips,
// byte sets, inserts, deletes, truncations, splices of two seeds, repeated chunks, interesting
// integers in size fields, format tokens such as quotes, delimiters and NUL bytes), then
// hand-written hostile inputs: truncation at every byte of a small valid file, zero and huge
// dimensions, dimensions whose product wraps 64 bits, a header of several MiB, a gzip bomb
// (a valid IDX header then 3 GiB of zeros), an 18-byte gzip whose trailer claims 4 GiB, a CSV of
// 200,000 columns or a 16 MiB cell, a config line of 8 MiB.
// Each input must either be refused with the reader's documented exception (hddp::Error;
// poly::UsageError for the command line), with a message of bounded size, or be accepted with
// sizes that agree with the bytes (IDX: product(dims) == data.size(); .npy: bytes ==
// product(shape) x itemsize; CSV: x.size() == count x features, ...). Anything else thrown
// (std::bad_alloc, std::length_error, ...), a crash, a sanitizer report, or an input that takes
// more than kSlowSeconds of this process's CPU time fails (CPU time, not the clock: a loaded
// machine slows every input alike without changing what each costs; a hang is caught by it
// and by ctest's TIMEOUT).
//
// main() caps the address space at 2 GiB (RLIMIT_AS), so an allocation sized from a hostile
// field fails here as std::bad_alloc instead of passing on a large machine; AddressSanitizer
// reserves terabytes of shadow memory, so under it the cap is left off and the readers' own
// checks bound every size.
//
// HDDP_FUZZ_ITERS: mutations per reader (default 2000; the sanitizer pass sets fewer in
// tests/CMakeLists.txt); HDDP_FUZZ_SEED changes the seed. Files live in a temporary folder
// under the working directory (the build tree under ctest), removed at the end.
//
// The suite's run: 21,300 inputs in about 3 s (Release), 7,100 in about 9 s under
// AddressSanitizer + UBSan (HDDP_FUZZ_ITERS=200), on a 2-vCPU Intel Xeon.
// A longer run (20x the default count), in the build tree (build/tests):
//   HDDP_FUZZ_ITERS=40000 ./test_fuzz_readers
// 2026-12-06, same machine, Release: 320,569 inputs (IDX 55,221, .npy 50,207, CSV 40,053,
// checkpoint 84,687, safetensors 80,311, config 10,090), every one refused with the documented
// exception or accepted consistent; slowest input 0.86 s (safetensors, the header of a million
// metadata entries), 12.6 s in all. And 200x with another seed (HDDP_FUZZ_ITERS=400000
// HDDP_FUZZ_SEED=7): 3,155,569 inputs, all passed, slowest 1.6 s, 81 s in all.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <hddp/core/checkpoint.h>
#include <hddp/core/model.h>
#include <hddp/core/optim.h>
#include <hddp/core/rng.h>
#include <hddp/core/safetensors.h>
#include <hddp/data/text.h>
#include <hddp/core/serialize.h>
#include <hddp/core/util.h>
#include <hddp/data/csv.h>
#include <hddp/data/idx.h>
#include <hddp/data/npy.h>
#include <hddp/kernels/check.h>
#include "tests/common/testing.h"
#ifdef HDDP_FUZZ_CONFIG
#include "poly_train/options.h"
#endif

using namespace hddp;
using namespace std::string_literals;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

int64_t env_int(const char* name, int64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : dflt;
}
const int64_t kIters = env_int("HDDP_FUZZ_ITERS", 2000);
const uint64_t kSeed = uint64_t(env_int("HDDP_FUZZ_SEED", 20261201));
// One input, however hostile, is read or refused within this (sanitizers slow code ~3-20x).
const double kSlowSeconds = kAsan ? 60.0 : 10.0;
// A refusal names the file and the problem; it never copies the input whole.
constexpr size_t kMaxMessage = 4096;

using hddp::testing_util::slurp;
using hddp::testing_util::spit;

std::string be32(uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  return std::string(b, 4);
}
template <class I>
std::string le(I v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}

// CPU seconds this process has used (every thread).
double cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The tally of one reader: inputs, how many were accepted, the slowest.
struct Tally {
  const char* reader;
  int64_t tried = 0, accepted = 0;
  double slowest = 0;
  void print() const {
    std::printf("%-12s %7lld inputs, %6lld accepted, slowest %.3f s\n", reader, (long long)tried,
                (long long)accepted, slowest);
  }
};

// Runs f (which reads one input and checks what it accepted) once. Refused means the
// documented exception E with a bounded message; anything else thrown is a failure naming
// the reader, the label and the input's first bytes.
template <class E = Error, class F>
bool attempt(Tally& t, const std::string& label, const std::string& input, F&& f) {
  ++t.tried;
  const double t0 = cpu_seconds();
  bool ok = false;
  try {
    f();
    ok = true;
  } catch (const E& e) {
    EXPECT_LE(std::strlen(e.what()), kMaxMessage)
        << t.reader << ": " << label << ": a message of " << std::strlen(e.what()) << " bytes: " << quote_input(e.what());
  } catch (const std::exception& e) {
    ADD_FAILURE() << t.reader << ": " << label << ": undocumented exception " << typeid(e).name() << ": "
                  << quote_input(e.what()) << "; input of " << input.size() << " bytes " << quote_input(input, 80);
  }
  const double dt = cpu_seconds() - t0;
  t.slowest = std::max(t.slowest, dt);
  EXPECT_LT(dt, kSlowSeconds) << t.reader << ": " << label << " took " << dt << " s of CPU; input " << quote_input(input, 80);
  t.accepted += ok;
  return ok;
}

// Deterministic mutations of seed inputs.
class Mutator {
 public:
  Mutator(uint64_t stream, std::vector<std::string> seeds, std::vector<std::string> tokens)
      : rng_(kSeed, stream), seeds_(std::move(seeds)), tokens_(std::move(tokens)) {}
  uint64_t below(uint64_t n) { return n ? rng_.next_u64() % n : 0; }
  const std::string& seed() { return seeds_[below(seeds_.size())]; }

  std::string operator()() {
    std::string b = seed();
    for (uint64_t k = 0, n = 1 + below(4); k < n; ++k) mutate(b);
    return b;
  }

 private:
  void mutate(std::string& b) {
    static const uint64_t interesting[] = {0, 1, 2, 3, 4, 7, 8, 16, 28, 60000, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000,
                                           0xffff, 0x10000, 0x1000000, 0x7fffffff, 0x80000000, 0xffffffff,
                                           0x100000000ULL, 0x7fffffffffffffffULL, 0x8000000000000000ULL,
                                           0xffffffffffffffffULL};
    const size_t n = b.size();
    switch (below(9)) {
      case 0:  // flip a bit
        if (n) b[below(n)] ^= char(1u << below(8));
        break;
      case 1:  // set a byte
        if (n) b[below(n)] = char(rng_.next_u64());
        break;
      case 2: {  // insert random bytes
        std::string r(1 + below(16), '\0');
        for (char& c : r) c = char(rng_.next_u64());
        b.insert(below(n + 1), r);
        break;
      }
      case 3:  // delete a range
        if (n) {
          const size_t at = below(n);
          b.erase(at, 1 + below(std::min<size_t>(n - at, 32)));
        }
        break;
      case 4:  // truncate
        b.resize(below(n + 1));
        break;
      case 5: {  // splice: a prefix of this, a suffix of a seed
        const std::string& o = seed();
        b = b.substr(0, below(n + 1)) + o.substr(below(o.size() + 1));
        break;
      }
      case 6:  // repeat a chunk
        if (n && n < (1u << 20)) {
          const size_t at = below(n), len = 1 + below(std::min<size_t>(n - at, 64));
          const std::string chunk = b.substr(at, len);
          std::string rep;
          for (uint64_t k = 0, m = 1 + below(64); k < m; ++k) rep += chunk;
          b.insert(at, rep);
        }
        break;
      case 7: {  // an interesting integer, 1, 2, 4 or 8 bytes, either byte order
        const size_t width = size_t(1) << below(4);
        if (n < width) break;
        uint64_t v = interesting[below(std::size(interesting))];
        if (below(4) == 0) v = v - 1 + below(3);
        unsigned char bytes[8];
        for (size_t k = 0; k < 8; ++k) bytes[k] = (unsigned char)(v >> (8 * k));
        const bool big = below(2);
        const size_t at = below(n - width + 1);
        for (size_t k = 0; k < width; ++k) b[at + k] = char(bytes[big ? width - 1 - k : k]);
        break;
      }
      case 8:  // a token of the format
        if (!tokens_.empty()) b.insert(below(n + 1), tokens_[below(tokens_.size())]);
        break;
    }
  }

  Rng rng_;
  std::vector<std::string> seeds_, tokens_;
};

// A file named `name` in `dir` holding exactly `bytes` (unlinked first: ext4 flushes a file
// truncated and rewritten in place on close).
std::string put_file(const std::string& p, const std::string& bytes) {
  std::remove(p.c_str());
  spit(p, bytes);
  return p;
}

// gzip (RFC 1952) of bytes through zlib.
std::string gzip(const std::string& in, int level = 6) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, uLong(in.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = uInt(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A gzip file of `head` then mib MiB of zeros: deflate (raw) with a full flush after the head
// and after one MiB of zeros, whose compressed bytes are then repeated; the gzip header and the
// trailer (CRC-32 through crc32_combine, the size mod 2^32) around them.
std::string gzip_bomb(const std::string& head, int mib) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 9, Z_DEFLATED, -15, 9, Z_RLE), Z_OK);
  const std::string zeros(size_t(1) << 20, '\0');
  auto pump = [&](const std::string& in, int flush) {
    std::string out(deflateBound(&z, uLong(in.size())) + 64, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = uInt(in.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = uInt(out.size());
    deflate(&z, flush);
    EXPECT_EQ(z.avail_in, 0u);
    out.resize(out.size() - z.avail_out);
    return out;
  };
  const std::string a = pump(head, Z_FULL_FLUSH), block = pump(zeros, Z_FULL_FLUSH), end = pump("", Z_FINISH);
  deflateEnd(&z);
  const uLong crc_zeros = crc32(0, reinterpret_cast<const Bytef*>(zeros.data()), uInt(zeros.size()));
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(head.data()), uInt(head.size()));
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10);
  out.reserve(out.size() + a.size() + block.size() * size_t(mib) + end.size() + 8);
  out += a;
  for (int i = 0; i < mib; ++i) out += block, crc = crc32_combine(crc, crc_zeros, z_off_t(zeros.size()));
  out += end;
  out += le(uint32_t(crc));
  out += le(uint32_t(head.size() + (uint64_t(mib) << 20)));
  return out;
}

class FuzzReaders : public hddp::testing_util::TempDirTest {};

// ---- IDX ------------------------------------------------------------------------------------

std::string idx(const std::vector<uint32_t>& dims, const std::string& data, uint8_t type = 0x08) {
  std::string b{'\0', '\0', char(type), char(dims.size())};
  for (uint32_t d : dims) b += be32(d);
  return b + data;
}

std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(i * 7 + 1);
  return s;
}

// What parse_idx / read_idx accepted must agree with its bytes.
void check_idx(const IdxArray& a) {
  ASSERT_TRUE(a.dims.size() >= 1 && a.dims.size() <= 4) << to_string(a.dims);
  uint64_t n = 1;
  for (int64_t d : a.dims) {
    ASSERT_GT(d, 0) << to_string(a.dims);
    ASSERT_FALSE(__builtin_mul_overflow(n, uint64_t(d), &n)) << to_string(a.dims);
  }
  ASSERT_EQ(n, a.data.size()) << to_string(a.dims);
}

TEST_F(FuzzReaders, Idx) {
  Tally t{"idx"};
  const std::vector<std::string> seeds = {idx({10}, pattern(10)), idx({5, 4, 3}, pattern(60)), idx({2, 3}, pattern(6)),
                                          idx({1, 1, 1, 2}, pattern(2))};
  auto parse = [&](const std::string& label, const std::string& b) {
    return attempt(t, label, b, [&] { check_idx(parse_idx(b, "fuzz.idx")); });
  };
  const std::string file = path("fuzz.idx"), gzfile = path("fuzz.idx.gz");
  auto read = [&](const std::string& label, const std::string& b) {
    put_file(file, b);
    return attempt(t, label, b, [&] { check_idx(read_idx(file)); });
  };
  for (const std::string& s : seeds) {
    EXPECT_TRUE(parse("seed", s));
    EXPECT_TRUE(read("seed, gzip'd", gzip(s)));
  }
  // Truncation at every byte, plain and gzip'd; a byte too many.
  const std::string& img = seeds[1];
  for (size_t n = 0; n < img.size(); ++n) EXPECT_FALSE(parse("truncated to " + std::to_string(n), img.substr(0, n)));
  const std::string gz = gzip(img);
  for (size_t n = 0; n < gz.size(); ++n) EXPECT_FALSE(read("gzip truncated to " + std::to_string(n), gz.substr(0, n)));
  EXPECT_FALSE(parse("a trailing byte", img + "x"));
  EXPECT_FALSE(read("a trailing byte, gzip'd", gzip(img + "x")));
  // Zero, huge and wrapping dimensions; bad counts and types.
  const std::vector<std::vector<uint32_t>> dims = {
      {0},          {0, 28, 28},        {1u << 16, 1u << 24, 1u << 24}, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
      {0xffffffff}, {60000, 28, 28},    {1u << 31, 2, 1u << 31, 2},     {1u << 16, 1u << 16, 1u << 16, 1u << 16},
      {},           {1, 1, 1, 1, 1},    {2, 0x80000000},                {3, 0x55555556}};
  for (const auto& d : dims) {
    EXPECT_FALSE(parse("dims " + to_string(std::vector<int64_t>(d.begin(), d.end())), idx(d, pattern(8))));
    EXPECT_FALSE(read("dims, gzip'd " + to_string(std::vector<int64_t>(d.begin(), d.end())), gzip(idx(d, pattern(8)))));
  }
  EXPECT_FALSE(parse("255 dimensions", std::string{'\0', '\0', 8, char(255)} + std::string(1020, '\1')));
  for (uint8_t type : {0x09, 0x0b, 0x0c, 0x0d, 0x0e, 0x00, 0xff})
    EXPECT_FALSE(parse("type " + std::to_string(type), idx({2}, pattern(2), type)));
  EXPECT_FALSE(parse("bad magic", "\x01" + seeds[0].substr(1)));
  // An 18-byte gzip (header and trailer, no deflate data) whose trailer claims 4 GiB - 1, and
  // a valid gzip whose trailer was changed to claim it.
  const std::string head18 = std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03", 10) + le(uint32_t(0)) + le(uint32_t(0xffffffff));
  ASSERT_EQ(head18.size(), 18u);
  EXPECT_FALSE(read("18-byte gzip claiming 4 GiB", head18));
  put_file(gzfile, head18);
  EXPECT_FALSE(attempt(t, "read_maybe_gzip of the 18-byte gzip", head18, [&] { (void)read_maybe_gzip(gzfile, 1 << 20); }));
  std::string big_claim = gz;
  const uint32_t claim = 0xffffffff;
  std::memcpy(big_claim.data() + big_claim.size() - 4, &claim, 4);
  EXPECT_FALSE(read("gzip whose trailer claims 4 GiB", big_claim));
  // Two gzip members, the second the rest of the data: zlib reads both as one stream.
  read("two gzip members", gzip(img.substr(0, 20)) + gzip(img.substr(20)));
  // A gzip bomb: a header announcing 1 x 28 x 28 bytes, then 4 GiB of zeros (the trailer's
  // size, mod 2^32, says 16 bytes), ~4 MiB compressed. Refused once the output passes what the
  // header announced. Built fast: after a full flush deflate's output for 1 MiB of zeros is the
  // same every time, so that block is deflated once and repeated.
  {
    put_file(file, gzip_bomb("head", 3));  // the construction checked on a small one
    EXPECT_EQ(read_maybe_gzip(file, 8 << 20), "head" + std::string(3 << 20, '\0'));
    const std::string b = gzip_bomb(idx({1, 28, 28}, ""), 4096);
    put_file(file, b);
    std::printf("gzip bomb: %zu bytes compressed, 4 GiB + 16 bytes uncompressed\n", b.size());
    EXPECT_FALSE(attempt(t, "gzip bomb", b, [&] { check_idx(read_idx(file)); }));
    EXPECT_FALSE(attempt(t, "gzip bomb, read_maybe_gzip of at most 1 MiB", b, [&] { (void)read_maybe_gzip(file, 1 << 20); }));
    EXPECT_FALSE(read("gzip bomb behind a valid file", gzip(img) + b));
  }
  // Mutations, plain (parse_idx), and gzip'd (read_idx) every 8th.
  Mutator mutate(1, seeds, {std::string(4, '\0'), std::string(4, '\xff'), be32(60000), be32(28), "\x08\x03", "\x08\x01"});
  for (int64_t i = 0; i < kIters; ++i) {
    const std::string b = mutate();
    parse("mutation " + std::to_string(i), b);
    if (i % 8 == 0) read("mutation, gzip'd " + std::to_string(i), gzip(b, 1));
  }
  // Mutations of the gzip'd bytes themselves.
  std::vector<std::string> gz_seeds;
  for (const std::string& s : seeds) gz_seeds.push_back(gzip(s));
  Mutator mutate_gz(2, gz_seeds, {});
  for (int64_t i = 0; i < kIters / 4; ++i) read("gzip mutation " + std::to_string(i), mutate_gz());
  t.print();
}

// ---- .npy -----------------------------------------------------------------------------------

// An .npy file as numpy writes it: the header padded with spaces to a multiple of 64, '\n'.
std::string npy(const std::string& dict, const std::string& data, int major = 1) {
  const size_t pre = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((pre + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string b = std::string("\x93NUMPY", 6) + char(major) + '\0';
  b += major == 1 ? le(uint16_t(h.size())) : le(uint32_t(h.size()));
  return b + h + data;
}
std::string dict(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

size_t npy_itemsize(const std::string& d) {
  return d == "|u1" ? 1 : d == "<f4" || d == "<i4" ? 4 : d == "<f8" || d == "<i8" ? 8 : 0;
}

void check_npy(const NpyArray& a) {
  const size_t item = npy_itemsize(a.dtype);
  ASSERT_GT(item, 0u) << a.dtype;
  uint64_t n = item;
  for (int64_t d : a.shape) {
    ASSERT_GE(d, 0);
    ASSERT_FALSE(__builtin_mul_overflow(n, uint64_t(d), &n)) << to_string(a.shape);
  }
  ASSERT_EQ(n, a.bytes.size()) << to_string(a.shape);
}

void check_dataset(const Dataset& d, bool labels) {
  ASSERT_GE(d.count, 0);
  const uint64_t f = uint64_t(d.features());
  ASSERT_GT(f, 0u);
  ASSERT_EQ(d.x.size() + d.x_bytes.size(), uint64_t(d.count) * f);
  ASSERT_TRUE(d.x.empty() || d.x_bytes.empty());
  if (!labels) {
    ASSERT_GE(d.target_width, 0);
    ASSERT_EQ(d.y.size(), uint64_t(d.count) * uint64_t(d.target_width));
    ASSERT_TRUE(d.labels.empty());
  } else {
    ASSERT_EQ(d.labels.size(), uint64_t(d.count));
    for (int32_t l : d.labels) ASSERT_TRUE(l >= 0 && l < d.num_classes);
  }
}

TEST_F(FuzzReaders, Npy) {
  Tally t{"npy"};
  const std::vector<std::string> seeds = {
      npy(dict("<f4", "(3, 4)"), pattern(48)),        npy(dict("|u1", "(5,)"), pattern(5), 2),
      npy(dict("<i8", "()"), pattern(8), 3),          npy(dict("<f8", "(2, 0, 3)"), ""),
      npy(dict("<i4", "(2, 2)"), std::string(16, '\1')), npy("{'shape': (2,), 'fortran_order': False, 'descr': '<f4'}", pattern(8))};
  const std::string file = path("fuzz.npy");
  auto read = [&](const std::string& label, const std::string& b) {
    put_file(file, b);
    return attempt(t, label, b, [&] { check_npy(read_npy(file)); });
  };
  for (const std::string& s : seeds) EXPECT_TRUE(read("seed", s));
  for (size_t n = 0; n < seeds[0].size(); ++n) EXPECT_FALSE(read("truncated to " + std::to_string(n), seeds[0].substr(0, n)));
  EXPECT_FALSE(read("a trailing byte", seeds[0] + "x"));
  // Zero, huge and wrapping shapes; numbers too long for int64.
  for (const char* shape : {"(4294967296, 4294967296)", "(9223372036854775807,)", "(9223372036854775807, 2)",
                            "(99999999999999999999,)", "(65536, 16777216, 16777216)", "(0, 9223372036854775807)",
                            "(2305843009213693952,)", "(-1,)", "(1, -1)", "(3)", "(,)", "(1,,)"})
    EXPECT_FALSE(read(std::string("shape ") + shape, npy(dict("<f8", shape), pattern(8)))) << shape;
  EXPECT_TRUE(read("shape with a zero", npy(dict("<f8", "(0, 9223372036854775807)"), "")));
  EXPECT_TRUE(read("8 dimensions", npy(dict("<f8", "(1, 1, 1, 1, 1, 1, 1, 1)"), pattern(8))));
  EXPECT_TRUE(read("64 dimensions", npy(dict("|u1", "(" + [] { std::string s; for (int i = 0; i < 64; ++i) s += "1,"; return s; }() + ")"), "x")));
  EXPECT_FALSE(read("65 dimensions", npy(dict("|u1", "(" + [] { std::string s; for (int i = 0; i < 65; ++i) s += "1,"; return s; }() + ")"), "x")));
  // Headers of several MiB: valid (padding), garbage, an unterminated string, a header
  // length past the end, NUL bytes.
  const std::string big_pad = dict("<f4", "(2,)") + std::string(5 << 20, ' ');
  read("a 5 MiB header of spaces", npy(big_pad, pattern(8), 2));
  EXPECT_FALSE(read("a 5 MiB garbage header", npy("{'descr': '<f4', " + std::string(5 << 20, 'x') + "}", pattern(8), 2)));
  EXPECT_FALSE(read("a 5 MiB unterminated string", npy("{'descr': '" + std::string(5 << 20, '<'), "", 3)));
  EXPECT_FALSE(read("a 5 MiB key", npy("{'" + std::string(5 << 20, 'k') + "': 1}", "", 2)));
  EXPECT_FALSE(read("a 5 MiB dimension", npy(dict("<f4", "(" + std::string(5 << 20, '7') + ",)"), "", 2)));
  EXPECT_FALSE(read("a 5 MiB tuple", npy(dict("<f4", "(" + [] { std::string s; for (int i = 0; i < (1 << 20); ++i) s += "1, "; return s; }() + ")"), "", 2)));
  EXPECT_FALSE(read("NUL bytes in the header", npy("{'descr': '<f4\0', 'fortran_order': False, 'shape': (2,), }"s, pattern(8))));
  std::string past = seeds[1];
  const uint32_t huge_len = 0xfffffff0;
  std::memcpy(past.data() + 8, &huge_len, 4);
  EXPECT_FALSE(read("a header length of 4 GiB", past));
  // The data set: mutated X with a valid y, and a valid X with a mutated y.
  const std::string xs = npy(dict("<f4", "(4, 2)"), pattern(32)), ys = npy(dict("<i8", "(4,)"), std::string(32, '\0'));
  const std::string xfile = path("x.npy"), yfile = path("y.npy");
  Mutator mutate(3, seeds, {"(", ")", ",", "'", "\"", "{", "}", ":", " ", "True", "False", "'descr'", "'shape'", "<f4", "|u1",
                            "9223372036854775807", "4294967296", "0", std::string(1, '\0'), "\n"});
  for (int64_t i = 0; i < kIters; ++i) {
    const std::string b = mutate();
    read("mutation " + std::to_string(i), b);
    if (i % 4 == 0) {
      const bool x_side = i % 8 == 0, labels = i % 3 != 0;
      put_file(xfile, x_side ? b : xs);
      put_file(yfile, x_side ? ys : (labels ? b : npy(dict("<f4", "(4, 1)"), pattern(16))));
      attempt(t, "data set " + std::to_string(i), b, [&] { check_dataset(read_npy_dataset(xfile, yfile, labels), labels); });
    }
  }
  t.print();
}

// ---- CSV ------------------------------------------------------------------------------------

void check_csv(const Dataset& d, const CsvOptions& o) {
  ASSERT_GT(d.count, 0);
  ASSERT_EQ(d.shape.size(), 1u);
  ASSERT_EQ(d.feature_names.size(), size_t(d.shape[0]));
  ASSERT_EQ(d.target_names.size(), o.targets.size());
  ASSERT_EQ(d.x.size(), uint64_t(d.count) * uint64_t(d.features()));
  if (o.labels) {
    ASSERT_EQ(d.labels.size(), size_t(d.count));
    for (int32_t l : d.labels) ASSERT_TRUE(l >= 0 && l < d.num_classes);
  } else {
    ASSERT_EQ(d.y.size(), uint64_t(d.count) * o.targets.size());
  }
  for (float v : d.x) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(FuzzReaders, Csv) {
  Tally t{"csv"};
  const std::vector<std::string> seeds = {"a,b,y\n1,2,3\n4,5.5,-6e3\n", "\xEF\xBB\xBF\"a\",\"b,c\",y\r\n1,2,0\r\n3,4,1",
                                          "a,y\n\n1,2\n\n+3,  4 \n", "x,y\n\"1\",\"2\"\n"};
  const std::vector<CsvOptions> opts = {{.targets = {"y"}}, {.targets = {"y"}, .labels = true}, {.targets = {}},
                                        {.targets = {"y"}, .features = {"a"}}};
  const std::string file = path("fuzz.csv");
  auto read = [&](const std::string& label, const std::string& b, const CsvOptions& o) {
    put_file(file, b);
    return attempt(t, label, b, [&] { check_csv(read_csv(file, o), o); });
  };
  for (size_t k = 0; k < seeds.size(); ++k) EXPECT_TRUE(read("seed " + std::to_string(k), seeds[k], opts[k % 2]));
  for (size_t n = 0; n < seeds[1].size(); ++n) read("truncated to " + std::to_string(n), seeds[1].substr(0, n), opts[1]);
  // NUL bytes, unterminated quotes, bad numbers.
  for (const std::string& s : {"a,y\n1,2\0\n"s, "a,\"y\n1,2\n"s, "a,y\n\"1,2\n"s, "a,y\n1\"\",2\n"s, "a,y\n1e999,2\n"s,
                               "a,y\n,2\n"s, "a,a\n1,2\n"s, "a,y\n0x10,1\n"s, "a,y\nnan,1\n"s, "a,y\n1,2,3\n"s,
                               "a,y\n1\n"s})
    EXPECT_FALSE(read("hostile " + quote_input(s), s, opts[0]));
  EXPECT_FALSE(read("a NUL inside a cell", "a,y\n1\0003,2\n"s, opts[0]));
  EXPECT_TRUE(read("a NUL in a column name", "\0,y\n1,2\n"s, opts[0]));
  // 200,000 columns: unique (accepted, one row), a duplicate at the end, a missing target.
  {
    std::string head, row;
    for (int c = 0; c < 200000; ++c) head += (c ? ",c" : "c") + std::to_string(c), row += c ? ",1" : "1";
    EXPECT_TRUE(read("200,000 columns", head + ",y\n" + row + ",2\n", opts[0]));
    EXPECT_FALSE(read("200,000 columns, a duplicate", head + ",c7\n" + row + ",2\n", opts[2]));
    EXPECT_FALSE(read("200,000 columns, no target", head + "\n" + row + "\n", opts[0]));
    EXPECT_FALSE(read("200,000 columns, a short row", head + ",y\n1,2\n", opts[0]));
  }
  // A cell of 16 MiB: a number, a quoted name, a quote never closed.
  EXPECT_FALSE(read("a 16 MiB number", "a,y\n" + std::string(16 << 20, '7') + ",1\n", opts[0]));
  EXPECT_FALSE(read("a 16 MiB column name", "\"" + std::string(16 << 20, 'n') + "\",b\n1,2\n", opts[0]));
  EXPECT_FALSE(read("a 16 MiB quote never closed", "a,y\n\"" + std::string(16 << 20, '1') + ",2\n", opts[0]));
  EXPECT_FALSE(read("16 MiB of commas", "a,y\n" + std::string(16 << 20, ',') + "\n", opts[0]));
  Mutator mutate(4, seeds, {",", "\"", "\n", "\r", "\r\n", std::string(1, '\0'), " ", "\t", "1e308", "-", "+", ".", "e",
                            "inf", "nan", "9223372036854775808", "y", "a", "\xEF\xBB\xBF"});
  for (int64_t i = 0; i < kIters; ++i) {
    const std::string b = mutate();
    read("mutation " + std::to_string(i), b, opts[mutate.below(opts.size())]);
  }
  t.print();
}

// ---- checkpoints ------------------------------------------------------------------------------

struct Model {
  Rng init{7, 0};
  Sequential<float> model{{Linear(1, 4), Tanh(), Linear(4, 1, false)}, 8, init};
  Adam<float> adam{model.num_params(), AdamHyper{}};
};

// Recomputes the trailing checksum so a mutation reaches the parser behind it.
std::string reseal(std::string b) {
  if (b.size() < 8) return b;
  const uint64_t h = fnv1a64(b.data(), b.size() - 8);
  std::memcpy(b.data() + b.size() - 8, &h, 8);
  return b;
}

TEST_F(FuzzReaders, Checkpoint) {
  Tally t{"checkpoint"};
  Model a, into;
  TrainState st;
  st.step = 3, st.world_size = 2;
  st.rng = {Rng(7, 1).state(), Rng(7, 2).state()};
  st.identity = {{"layers", "Linear(1, 4) -> Tanh() -> Linear(4, 1, bias=False)"}};
  st.records = {{"losses", "abcdefgh"}};
  save_checkpoint(path("seed.ckpt"), a.model.arena(), a.adam, st);
  const std::string good = slurp(path("seed.ckpt"));
  auto load = [&](const std::string& label, const std::string& b) {
    return attempt(t, label, b, [&] {
      const Checkpoint c = parse_checkpoint(b, "fuzz.ckpt");
      for (const TensorData& d : c.file.tensors) {
        ASSERT_TRUE(d.rows >= 0 && d.cols >= 0);
        ASSERT_EQ(d.bytes.size(), uint64_t(d.rows) * uint64_t(d.cols) * 4);
      }
      ASSERT_TRUE(c.state.rng.empty() || c.state.rng.size() == size_t(c.state.world_size));
      try {
        restore_checkpoint(c, "fuzz.ckpt", into.model.arena(), into.adam);
      } catch (const Error& e) {
        ASSERT_LE(std::strlen(e.what()), kMaxMessage);
      }
      (void)identity_diff(c.state, 2, st.identity);
    });
  };
  EXPECT_TRUE(load("seed", good));
  for (size_t n = 0; n < good.size(); ++n) {
    EXPECT_FALSE(load("truncated to " + std::to_string(n), good.substr(0, n)));
    EXPECT_FALSE(load("truncated and re-sealed to " + std::to_string(n), reseal(good.substr(0, n))));
  }
  // Every 4- and 8-byte field before the payload set to every interesting value, re-sealed.
  const uint64_t interesting[] = {0, 1, 0x7fffffff, 0x80000000, 0xffffffff, uint64_t(good.size()), 0x7fffffffffffffffULL,
                                  0x8000000000000000ULL, 0xffffffffffffffffULL, 0x100000000ULL, 0x4000000000000000ULL};
  const size_t structure = std::min<size_t>(good.size() - 16, 600);
  for (size_t at = 0; at < structure; at += 4)
    for (uint64_t v : interesting)
      for (size_t width : {4, 8}) {
        std::string b = good;
        std::memcpy(b.data() + at, &v, width);
        load("field at " + std::to_string(at) + " = " + std::to_string(v), reseal(b));
      }
  Mutator mutate(5, {good}, {"ckpt.", "ckpt.id.", "ckpt.rec.", "optim.", std::string(8, '\xff')});
  for (int64_t i = 0; i < kIters; ++i) {
    const std::string b = mutate();
    load("mutation " + std::to_string(i), b);
    load("mutation, re-sealed " + std::to_string(i), reseal(b));
  }
  t.print();
}

// ---- token files ----------------------------------------------------------------------------

// Recomputes the CRC-32 of the tokens (and nothing else) so a mutation reaches the checks behind it.
std::string reseal_tokens(std::string b) {
  if (b.size() < 32) return b;
  const uint32_t c = uint32_t(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(b.data()) + 32, uInt(b.size() - 32)));
  std::memcpy(b.data() + 24, &c, 4);
  return b;
}

TEST_F(FuzzReaders, TokenFile) {
  Tally t{"token file"};
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back(uint16_t(i * 7 % 256));
  write_token_file(path("seed.tok"), tokens, 256);
  const std::string good = slurp(path("seed.tok"));
  write_token_file(path("wide.tok"), {0, 65535, 1000, 7}, 65536);
  const std::string wide = slurp(path("wide.tok"));
  auto load = [&](const std::string& label, const std::string& b) {
    return attempt(t, label, b, [&] {
      const TokenFile f = parse_token_file(b, "fuzz.tok");
      ASSERT_EQ(b.size(), 32 + 2 * f.tokens.size());
      ASSERT_TRUE(f.vocab >= 1 && f.vocab <= 65536);
      for (uint16_t v : f.tokens) ASSERT_LT(v, f.vocab);
    });
  };
  EXPECT_TRUE(load("seed", good));
  EXPECT_TRUE(load("wide", wide));
  for (size_t n = 0; n < good.size(); n += (n < 64 ? 1 : 37)) {
    EXPECT_FALSE(load("truncated to " + std::to_string(n), good.substr(0, n)));
    EXPECT_FALSE(load("truncated and re-sealed to " + std::to_string(n), reseal_tokens(good.substr(0, n))));
  }
  const uint64_t interesting[] = {0, 1, 2, 255, 256, 65535, 65536, 65537, 0x7fffffff, 0x80000000, 0xffffffff,
                                  0x7fffffffffffffffULL, 0x8000000000000000ULL, 0xffffffffffffffffULL, 0x100000000ULL};
  for (size_t at = 8; at < 32; at += 4)
    for (uint64_t v : interesting)
      for (size_t width : {4, 8}) {
        if (at + width > 32) continue;
        std::string b = good;
        std::memcpy(b.data() + at, &v, width);
        load("field at " + std::to_string(at) + " = " + std::to_string(v), b);
        load("field at " + std::to_string(at) + " = " + std::to_string(v) + ", re-sealed", reseal_tokens(b));
      }
  Mutator mutate(6, {good, wide}, {"HDDPTOK1", std::string(2, '\xff'), std::string(8, '\0')});
  for (int64_t i = 0; i < kIters; ++i) {
    const std::string b = mutate();
    load("mutation " + std::to_string(i), b);
    load("mutation, re-sealed " + std::to_string(i), reseal_tokens(b));
  }
  t.print();
}

// ---- safetensors ----------------------------------------------------------------------------

std::string safetensors(const std::string& header, const std::string& data) {
  return le(uint64_t(header.size())) + header + data;
}

TEST_F(FuzzReaders, Safetensors) {
  Tally t{"safetensors"};
  Model into;
  SafeTensors st;
  st.metadata = {{"format", "pt"}};
  for (size_t i = 0; i < into.model.arena().num_tensors(); ++i) {
    const ParamView& v = into.model.arena().view(i);
    const std::vector<int64_t> shape = v.shape.empty() ? std::vector<int64_t>{v.rows, v.cols} : v.shape;
    st.tensors.push_back({v.name, "F32", shape, pattern(size_t(v.size()) * 4)});
  }
  const std::string good = encode_safetensors(st);
  const std::string other = encode_safetensors({{{"a", "F64", {2, 0}, ""}, {"b", "U8", {3}, "xyz"}, {"c", "BF16", {}, "zz"}}, {}});
  auto load = [&](const std::string& label, const std::string& b) {
    return attempt(t, label, b, [&] {
      const SafeTensors s = parse_safetensors(b, "fuzz.safetensors");
      static const std::map<std::string, uint64_t> sizes = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
                                                            {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U64", 8},  {"U32", 4},
                                                            {"U16", 2}, {"U8", 1},  {"BOOL", 1}};
      uint64_t total = 0;
      for (const SafeTensor& x : s.tensors) {
        ASSERT_TRUE(sizes.count(x.dtype)) << x.dtype;
        uint64_t n = sizes.at(x.dtype);
        for (int64_t d : x.shape) {
          ASSERT_GE(d, 0);
          ASSERT_FALSE(__builtin_mul_overflow(n, uint64_t(d), &n));
        }
        ASSERT_EQ(n, x.data.size());
        total += n;
      }
      ASSERT_LE(total, b.size());
      try {
        load_weights(s, "fuzz.safetensors", into.model.arena());
      } catch (const Error& e) {
        ASSERT_LE(std::strlen(e.what()), kMaxMessage);
      }
    });
  };
  EXPECT_TRUE(load("seed", good));
  EXPECT_TRUE(load("seed 2", other));
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(load("truncated to " + std::to_string(n), good.substr(0, n)));
  for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(7), uint64_t(1) << 32, ~uint64_t(0), ~uint64_t(0) - 7,
                     uint64_t(good.size() - 8), uint64_t(good.size() - 7)}) {
    std::string b = good;
    std::memcpy(b.data(), &n, 8);
    load("header length " + std::to_string(n), b);
  }
  const std::string d16(16, '\1');
  for (const char* h : {
           R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 16]}})",
           R"({"w": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 16]}})",
           R"({"w": {"dtype": "F32", "shape": [65536, 16777216, 16777216], "data_offsets": [0, 16]}})",
           R"({"w": {"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}})",
           R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [18446744073709551615, 16]}})",
           R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 18446744073709551615]}})",
           R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [18446744073709551600, 18446744073709551615]}})",
           R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16, 32]}})",
           R"({"w": {"dtype": "F32", "shape": [1e300], "data_offsets": [0, 16]}})",
           R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}, "w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
           R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "v": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
           R"({"__metadata__": {"a": 1}})", R"({"__metadata__": [1]})", R"([])", R"("x")", "{", "{\"w\": \"\\u0000\"}"})
    load(std::string("header ") + quote_input(h, 60), safetensors(h, d16));
  // Headers of tens of MiB: nesting, a long flat array, a long name, many metadata entries.
  load("64 MiB of '['", safetensors(std::string(64 << 20, '['), ""));
  load("a shape of 8M dimensions", safetensors(R"({"w": {"dtype": "F32", "shape": [)" + [] { std::string s; for (int i = 0; i < (8 << 20); ++i) s += "1,"; return s; }() + "1]}}", ""));
  load("a 32 MiB name", safetensors("{\"" + std::string(32 << 20, 'n') + "\": 1}", ""));
  load("1M metadata entries", safetensors("{\"__metadata__\": {" + [] { std::string s; for (int i = 0; i < (1 << 20); ++i) s += (i ? ",\"" : "\"") + std::to_string(i) + "\":\"\""; return s; }() + "}}", ""));
  Mutator mutate(6, {good, other}, {"\"", "[", "]", "{", "}", ",", ":", "\\", "\\u0000", "-1", "1e400", "18446744073709551615",
                                    "\"F32\"", "\"shape\"", "\"data_offsets\"", "\"__metadata__\"", "null", "true"});
  for (int64_t i = 0; i < 2 * kIters; ++i) load("mutation " + std::to_string(i), mutate());
  t.print();
}

// ---- the --config file ----------------------------------------------------------------------

#ifdef HDDP_FUZZ_CONFIG
TEST_F(FuzzReaders, ConfigFile) {
  Tally t{"config"};
  const std::string file = path("fuzz.toml");
  auto parse = [&](const std::string& label, const std::string& b) {
    put_file(file, b);
    return attempt<poly::UsageError>(t, label, b, [&] {
      const char* argv[] = {"--config", file.c_str()};
      const poly::Options o = poly::parse_options(2, argv);
      ASSERT_TRUE(o.epochs >= 1 && o.epochs <= poly::kMaxEpochs);
      ASSERT_FALSE(o.hidden.empty());
      for (int64_t w : o.hidden) ASSERT_TRUE(w >= 1 && w <= 65536);
      ASSERT_TRUE(o.lr > 0 && std::isfinite(o.lr));
      ASSERT_GE(o.batch_size, 1);
    });
  };
  const std::vector<std::string> seeds = {"epochs = 3\nhidden = \"8,8\"\nlr = 0.01\n",
                                          "# comment\nepochs=5\nhidden=[4, 2]\noptimizer = 'sgd'\nmomentum = 0.5\n",
                                          "[default]\nbatch-size = 16\nfunction = \"griewank\"\n", ""};
  for (const std::string& s : seeds) EXPECT_TRUE(parse("seed", s));
  for (size_t n = 0; n < seeds[1].size(); ++n) parse("truncated to " + std::to_string(n), seeds[1].substr(0, n));
  for (const std::string& s : std::vector<std::string>{
           "epochs = 3\0\n"s, "epo\0chs = 3\n"s, "hidden = \"8,8\n", "hidden = '8,8\n",
           "hidden = [8, 8\n", "[section\nepochs = 3\n", "hidden = \"\"\"8,8\n", "epochs = \"\n", "= 3\n", "epochs\n",
           "epochs = 3 = 4\n", "\xff\xfe\n", "\"epochs\" = 3\n", "lr = 1e999\n", "hidden = \"65537\"\n"})
    parse("hostile " + quote_input(s), s);
  // An 8 MiB line, a 64 MiB file, 100,000 keys.
  EXPECT_FALSE(parse("an 8 MiB value", "out = \"" + std::string(8 << 20, 'o') + "\"\n"));
  EXPECT_FALSE(parse("an 8 MiB key", std::string(8 << 20, 'k') + " = 3\n"));
  EXPECT_FALSE(parse("an 8 MiB quote never closed", "out = \"" + std::string(8 << 20, '"') + "\n"));
  EXPECT_FALSE(parse("a 64 MiB file", [] { std::string s; while (s.size() < (64u << 20)) s += "epochs = 3\n"; return s; }()));
  parse("100,000 keys", [] { std::string s; for (int i = 0; i < 100000; ++i) s += "epochs = 3\n"; return s; }());
  Mutator mutate(7, seeds, {"=", "\"", "'", "[", "]", "\n", "#", ",", "\"\"\"", std::string(1, '\0'), "epochs", "hidden",
                            "[default]", "config", "--epochs", "\\", "1e999"});
  // CLI11 builds its whole option table per parse: a quarter of the count.
  for (int64_t i = 0; i < kIters / 4; ++i) parse("mutation " + std::to_string(i), mutate());
  t.print();
}
#endif

}  // namespace

int main(int argc, char** argv) {
  // 2 GiB of address space, unless AddressSanitizer (which reserves terabytes) is on.
  if (!kAsan) {
    const rlimit lim{rlim_t(2) << 30, rlim_t(2) << 30};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) std::perror("setrlimit(RLIMIT_AS)");
  }
  ::testing::InitGoogleTest(&argc, argv);
  std::printf("HDDP_FUZZ_ITERS=%lld HDDP_FUZZ_SEED=%llu%s\n", (long long)kIters, (unsigned long long)kSeed,
              kAsan ? " (AddressSanitizer: no RLIMIT_AS)" : ", RLIMIT_AS 2 GiB");
  return RUN_ALL_TESTS();
}
