#include <hddp/core/serialize.h>

#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

static_assert(std::endian::native == std::endian::little,
              "the .hddp format is little-endian; this build writes raw host integers and floats");

namespace {

constexpr size_t kHeaderBytes = 32, kChecksumBytes = 8;
constexpr uint32_t kMaxNameBytes = 4096;
const std::string kReserved = "hddp.";
const std::string kOptimPrefix = "optim.";

size_t dtype_size(DType d) { return d == DType::Float32 ? 4 : 8; }

// An optimizer kind from a file, for a message: as is when short ("adam"), escaped, quoted and
// cut at 40 bytes when not.
std::string kind_text(const std::string& k) {
  const std::string q = quote_input(k, 40);
  return k.size() <= 40 ? q.substr(1, q.size() - 2) : q;
}

template <class I>
void put(std::string& out, I v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Bounds-checked reader over the file's bytes; errors name the file.
struct Cursor {
  const std::string& path;
  const std::string& buf;
  size_t pos, end;
  void need(size_t n, const char* what) {
    HDDP_CHECK(n <= end - pos, "'" << path << "': " << what << " of " << n << " bytes at byte " << pos
                                   << " runs past the end of the data (corrupt file)");
  }
  template <class I>
  I get(const char* what) {
    need(sizeof(I), what);
    I v;
    std::memcpy(&v, buf.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  std::string bytes(size_t n, const char* what) {
    need(n, what);
    std::string s = buf.substr(pos, n);
    pos += n;
    return s;
  }
};

}  // namespace


const char* to_string(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "unknown";
}

std::string encode_u64s(const std::vector<uint64_t>& v) {
  std::string s;
  for (uint64_t x : v) put(s, x);
  return s;
}

std::vector<uint64_t> decode_u64s(const std::string& bytes, const std::string& what) {
  HDDP_CHECK(bytes.size() % 8 == 0, what << ": " << bytes.size() << " bytes is not a whole number of u64");
  std::vector<uint64_t> v(bytes.size() / 8);
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

namespace {

template <class T>
std::string encode(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}

template <class T>
std::vector<T> decode(const std::string& bytes, const std::string& what) {
  HDDP_CHECK(bytes.size() % sizeof(T) == 0, what << ": " << bytes.size() << " bytes, not a whole number of "
                                                 << sizeof(T) << "-byte values");
  std::vector<T> v(bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
  return v;
}

}  // namespace

std::string encode_floats(const std::vector<float>& v) { return encode(v); }
std::vector<float> decode_floats(const std::string& bytes, const std::string& what) { return decode<float>(bytes, what); }
std::string encode_doubles(const std::vector<double>& v) { return encode(v); }
std::vector<double> decode_doubles(const std::string& bytes, const std::string& what) { return decode<double>(bytes, what); }


std::string encode_tensor_file(const std::string& path, DType dtype, const std::vector<TensorRef>& tensors,
                               const Meta& meta) {
  HDDP_CHECK_ARG(dtype == DType::Float32 || dtype == DType::Float64, "write_tensor_file: unknown dtype");
  const size_t es = dtype_size(dtype);
  std::set<std::string> names;
  for (const TensorRef& t : tensors) {
    HDDP_CHECK_ARG(!t.name.empty() && t.name.size() <= kMaxNameBytes,
                   "write_tensor_file('" << path << "'): tensor name must have 1.." << kMaxNameBytes << " bytes");
    HDDP_CHECK_ARG(names.insert(t.name).second, "write_tensor_file('" << path << "'): duplicate tensor '" << t.name << "'");
    HDDP_CHECK_ARG(t.rows >= 0 && t.cols >= 0, "write_tensor_file('" << path << "'): tensor '" << t.name
                                                                    << "' has negative shape " << t.rows << "x" << t.cols);
    HDDP_CHECK_ARG(t.data || t.rows * t.cols == 0, "write_tensor_file('" << path << "'): tensor '" << t.name << "' has no data");
  }
  for (const auto& [k, v] : meta)
    HDDP_CHECK_ARG(!k.empty() && k.size() <= kMaxNameBytes,
                   "write_tensor_file('" << path << "'): metadata key must have 1.." << kMaxNameBytes << " bytes");

  std::string out;
  out.append(kFileMagic, 4);
  put(out, kFileVersion);
  put(out, uint64_t(0));  // total size, patched below
  put(out, uint32_t(dtype));
  put(out, uint32_t(tensors.size()));
  put(out, uint32_t(meta.size()));
  put(out, uint32_t(0));  // flags
  for (const TensorRef& t : tensors) {
    put(out, uint32_t(t.name.size()));
    out += t.name;
    put(out, t.rows);
    put(out, t.cols);
  }
  for (const auto& [k, v] : meta) {
    put(out, uint32_t(k.size()));
    out += k;
    put(out, uint64_t(v.size()));
    out += v;
  }
  for (const TensorRef& t : tensors)
    out.append(static_cast<const char*>(t.data), size_t(t.rows * t.cols) * es);
  const uint64_t total = out.size() + kChecksumBytes;
  std::memcpy(out.data() + 8, &total, 8);
  put(out, fnv1a64(out.data(), out.size()));
  return out;
}

void write_tensor_file(const std::string& path, DType dtype, const std::vector<TensorRef>& tensors,
                       const Meta& meta) {
  write_file_atomic(path, encode_tensor_file(path, dtype, tensors, meta));
}

TensorFile read_tensor_file(const std::string& path) { return parse_tensor_file(read_file(path), path); }

TensorFile parse_tensor_file(const std::string& buf, const std::string& path) {
  HDDP_CHECK(buf.size() >= 4 && std::memcmp(buf.data(), kFileMagic, 4) == 0,
             "'" << path << "' is not an hddp tensor file (its first bytes are not \"HDDP\")");
  HDDP_CHECK(buf.size() >= kHeaderBytes + kChecksumBytes,
             "'" << path << "' is truncated: " << buf.size() << " bytes, less than the "
                 << kHeaderBytes + kChecksumBytes << "-byte header and checksum");
  uint32_t version;
  uint64_t total;
  std::memcpy(&version, buf.data() + 4, 4);
  std::memcpy(&total, buf.data() + 8, 8);
  HDDP_CHECK(version == kFileVersion, "'" << path << "' has format version " << version
                                          << "; this build reads version " << kFileVersion);
  HDDP_CHECK(buf.size() >= total, "'" << path << "' is truncated: " << buf.size()
                                      << " bytes, the header records " << total);
  HDDP_CHECK(buf.size() == total, "'" << path << "' has " << buf.size() - total
                                      << " unexpected bytes after the recorded size of " << total);
  uint64_t stored;
  std::memcpy(&stored, buf.data() + buf.size() - kChecksumBytes, 8);
  const uint64_t computed = fnv1a64(buf.data(), buf.size() - kChecksumBytes);
  HDDP_CHECK(stored == computed, "'" << path << "' is corrupt: checksum mismatch (FNV-1a 64 stored 0x"
                                     << std::hex << stored << ", computed 0x" << computed << ")");

  Cursor c{path, buf, 16, buf.size() - kChecksumBytes};
  TensorFile f;
  const uint32_t dt = c.get<uint32_t>("dtype");
  HDDP_CHECK(dt == uint32_t(DType::Float32) || dt == uint32_t(DType::Float64),
             "'" << path << "' has unknown dtype code " << dt);
  f.dtype = DType(dt);
  const uint32_t nt = c.get<uint32_t>("tensor count"), nm = c.get<uint32_t>("metadata count");
  const uint32_t flags = c.get<uint32_t>("flags");
  HDDP_CHECK(flags == 0, "'" << path << "' has flags 0x" << std::hex << flags << ", unknown to version 1");
  // Each descriptor takes at least 21 bytes, each metadata entry 13: both counts are bounded by
  // the bytes present before anything is reserved. Every size below is checked against the
  // bytes left before it is used.
  HDDP_CHECK(nt <= (c.end - c.pos) / 21, "'" << path << "' records " << nt << " tensors, more than fit in the file");
  HDDP_CHECK(nm <= (c.end - c.pos - 21 * uint64_t(nt)) / 13,
             "'" << path << "' records " << nm << " metadata entries, more than fit in the file");
  const size_t es = dtype_size(f.dtype);
  const uint64_t max_values = (c.end - c.pos) / es;  // no tensor holds more values than that
  uint64_t payload = 0;
  f.tensors.resize(nt);
  std::set<std::string> names;
  for (TensorData& t : f.tensors) {
    const uint32_t len = c.get<uint32_t>("tensor name length");
    HDDP_CHECK(len >= 1 && len <= kMaxNameBytes, "'" << path << "' has a tensor name of " << len << " bytes");
    t.name = c.bytes(len, "tensor name");
    HDDP_CHECK(names.insert(t.name).second, "'" << path << "' holds tensor " << quote_input(t.name, 60) << " twice");
    t.rows = c.get<int64_t>("tensor rows");
    t.cols = c.get<int64_t>("tensor cols");
    const std::string what = "'" + path + "': tensor " + quote_input(t.name, 60) + " has an impossible shape " +
                             std::to_string(t.rows) + "x" + std::to_string(t.cols);
    HDDP_CHECK(t.rows >= 0 && t.cols >= 0, "'" << path << "': tensor " << quote_input(t.name, 60)
                                               << " has a negative shape " << t.rows << "x" << t.cols);
    const uint64_t n = checked_mul(uint64_t(t.rows), uint64_t(t.cols), what, max_values);
    payload = checked_add(payload, n * es, "'" + path + "': the tensors' payload", c.end - c.pos);
  }
  for (uint32_t i = 0; i < nm; ++i) {
    const uint32_t len = c.get<uint32_t>("metadata key length");
    HDDP_CHECK(len >= 1 && len <= kMaxNameBytes, "'" << path << "' has a metadata key of " << len << " bytes");
    std::string key = c.bytes(len, "metadata key");
    const uint64_t vlen = c.get<uint64_t>("metadata value length");
    c.need(vlen, "metadata value");
    HDDP_CHECK(!f.meta.count(key), "'" << path << "' holds metadata " << quote_input(key, 60) << " twice");
    f.meta[key] = c.bytes(size_t(vlen), "metadata value");
  }
  HDDP_CHECK(payload == c.end - c.pos, "'" << path << "': the descriptors need " << payload
                                           << " payload bytes, the file has " << c.end - c.pos);
  for (TensorData& t : f.tensors) {
    const size_t n = size_t(t.rows * t.cols) * es;
    t.bytes.assign(buf.begin() + std::ptrdiff_t(c.pos), buf.begin() + std::ptrdiff_t(c.pos + n));
    c.pos += n;
  }
  return f;
}

template <class T>
std::string encode_state(const std::string& path, const ParamArena<T>& params, Optimizer<T>* opt, const Meta& extra) {
  std::vector<TensorRef> tensors;
  for (size_t i = 0; i < params.num_tensors(); ++i) {
    const ParamView& v = params.view(i);
    tensors.push_back({v.name, v.rows, v.cols, params.param(i)});
  }
  Meta meta;
  for (const auto& [k, v] : extra) {
    HDDP_CHECK_ARG(k.compare(0, kReserved.size(), kReserved) != 0,
                   "save_state('" << path << "'): metadata key '" << k << "' uses the reserved prefix 'hddp.'");
    meta[k] = v;
  }
  if (opt) {
    HDDP_CHECK_ARG(opt->size() == params.size(), "save_state('" << path << "'): the optimizer has " << opt->size()
                                                                << " values, the arena " << params.size());
    for (const StateBuffer<T>& s : opt->state()) tensors.push_back({kOptimPrefix + s.name, 1, s.size, s.data});
    meta["hddp.optim.kind"] = opt->kind();
    meta["hddp.optim.steps"] = encode_u64s({uint64_t(opt->steps())});
  }
  return encode_tensor_file(path, dtype_of<T>(), tensors, meta);
}

template <class T>
void save_state(const std::string& path, const ParamArena<T>& params, Optimizer<T>* opt, const Meta& extra) {
  write_file_atomic(path, encode_state(path, params, opt, extra));
}

template <class T>
void load_state(const std::string& path, ParamArena<T>& params, Optimizer<T>* opt, Meta* extra) {
  load_state(read_tensor_file(path), path, params, opt, extra);
}

template <class T>
void load_state(const TensorFile& f, const std::string& path, ParamArena<T>& params, Optimizer<T>* opt,
                Meta* extra) {
  const std::string where = "cannot load '" + path + "': ";
  HDDP_CHECK(f.dtype == dtype_of<T>(), where << "it holds " << to_string(f.dtype) << " values, the model is "
                                             << to_string(dtype_of<T>()));
  std::map<std::string, const TensorData*> by_name;
  for (const TensorData& t : f.tensors) by_name[t.name] = &t;

  // Parameters: the same names and shapes, nothing missing, nothing extra.
  std::vector<const TensorData*> src(params.num_tensors());
  for (size_t i = 0; i < params.num_tensors(); ++i) {
    const ParamView& v = params.view(i);
    auto it = by_name.find(v.name);
    HDDP_CHECK(it != by_name.end(), where << "the model's parameter '" << v.name << "' is not in the file");
    const TensorData& t = *it->second;
    HDDP_CHECK(t.rows == v.rows && t.cols == v.cols, where << "parameter '" << v.name << "' is " << t.rows << "x"
                                                           << t.cols << " in the file but " << v.rows << "x" << v.cols
                                                           << " in the model");
    src[i] = &t;
  }
  for (const TensorData& t : f.tensors)
    HDDP_CHECK(t.name.compare(0, kOptimPrefix.size(), kOptimPrefix) == 0 || params.find(t.name),
               where << "the file has parameter " << quote_input(t.name, 60) << " that the model lacks");

  // Optimizer: same kind, the same state buffers with the right sizes.
  std::vector<std::pair<StateBuffer<T>, const TensorData*>> osrc;
  uint64_t steps = 0;
  if (opt) {
    auto kind = f.meta.find("hddp.optim.kind");
    HDDP_CHECK(kind != f.meta.end(), where << "the file has no optimizer state (saved without an optimizer)");
    HDDP_CHECK(kind->second == opt->kind(), where << "the file has " << kind_text(kind->second) << " optimizer state, the optimizer is "
                                                  << opt->kind());
    auto st = f.meta.find("hddp.optim.steps");
    HDDP_CHECK(st != f.meta.end(), where << "metadata 'hddp.optim.steps' is missing");
    const std::vector<uint64_t> sv = decode_u64s(st->second, where + "metadata 'hddp.optim.steps'");
    HDDP_CHECK(sv.size() == 1 && sv[0] <= uint64_t(INT64_MAX), where << "metadata 'hddp.optim.steps' is malformed");
    steps = sv[0];
    size_t n_optim_in_file = 0;
    for (const TensorData& t : f.tensors) n_optim_in_file += t.name.compare(0, kOptimPrefix.size(), kOptimPrefix) == 0;
    const std::vector<StateBuffer<T>> bufs = opt->state();
    HDDP_CHECK(n_optim_in_file == bufs.size(), where << "the file has " << n_optim_in_file
                                                     << " optimizer state buffers, the optimizer " << bufs.size()
                                                     << " (different settings, e.g. momentum?)");
    for (const StateBuffer<T>& b : bufs) {
      auto it = by_name.find(kOptimPrefix + b.name);
      HDDP_CHECK(it != by_name.end(), where << "optimizer state '" << kOptimPrefix + b.name << "' is not in the file");
      HDDP_CHECK(it->second->rows == 1 && it->second->cols == b.size,
                 where << "optimizer state '" << it->first << "' has " << it->second->rows * it->second->cols
                       << " values in the file, the optimizer " << b.size);
      osrc.push_back({b, it->second});
    }
  }

  // Everything checked: now copy.
  for (size_t i = 0; i < params.num_tensors(); ++i)
    std::memcpy(params.param(i), src[i]->bytes.data(), src[i]->bytes.size());
  if (opt) {
    for (auto& [b, t] : osrc) std::memcpy(b.data, t->bytes.data(), t->bytes.size());
    opt->set_steps(int64_t(steps));
  }
  if (extra) {
    extra->clear();
    for (const auto& [k, v] : f.meta)
      if (k.compare(0, kReserved.size(), kReserved) != 0) (*extra)[k] = v;
  }
}

template std::string encode_state<float>(const std::string&, const ParamArena<float>&, Optimizer<float>*, const Meta&);
template std::string encode_state<double>(const std::string&, const ParamArena<double>&, Optimizer<double>*, const Meta&);
template void save_state<float>(const std::string&, const ParamArena<float>&, Optimizer<float>*, const Meta&);
template void save_state<double>(const std::string&, const ParamArena<double>&, Optimizer<double>*, const Meta&);
template void load_state<float>(const std::string&, ParamArena<float>&, Optimizer<float>*, Meta*);
template void load_state<double>(const std::string&, ParamArena<double>&, Optimizer<double>*, Meta*);
template void load_state<float>(const TensorFile&, const std::string&, ParamArena<float>&, Optimizer<float>*, Meta*);
template void load_state<double>(const TensorFile&, const std::string&, ParamArena<double>&, Optimizer<double>*,
                                 Meta*);

}  // namespace hddp
