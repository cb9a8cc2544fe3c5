#include <hddp/core/safetensors.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include <hddp/core/util.h>
#include <hddp/kernels/check.h>

namespace hddp {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using json = nlohmann::ordered_json;  // written: the header lists the tensors in data order
// Read: keys in a std::map. ordered_json finds a key by a linear search, so a header of a
// million keys took hours to parse; the order read is not needed (tensors are sorted by offset).
using read_json = nlohmann::json;
constexpr const char* kMetadataKey = "__metadata__";
constexpr uint64_t kMaxHeader = uint64_t(100) << 20;  // the reference implementation's limit
constexpr int kMaxDepth = 4;                           // {name: {"shape": [..]}}: 3 levels
constexpr size_t kMaxDims = 16;

constexpr uint64_t kMaxValues = uint64_t(1) << 22;     // JSON values in a header: ~500,000 tensors
constexpr uint64_t kMaxItems = 64;                      // in an array (a shape has up to kMaxDims)

// The header's shape, scanned before the JSON parser sees it, so that its tree stays a small
// multiple of the header: nesting deeper than kMaxDepth (100 MiB of '[' would take the
// parser's stack and gigabytes), an array of more than kMaxItems items (a shape or
// data_offsets has at most kMaxDims; a flat array of 50 million numbers would take 800 MB;
// parse_entry names a shape of too many dimensions), more than kMaxValues
// values in all. Returns what is wrong, or "" (the parser finds the rest).
std::string prescan(const char* p, const char* end) {
  int depth = 0;
  bool array[kMaxDepth + 1] = {};
  uint64_t items[kMaxDepth + 1] = {}, values = 0;
  bool in_string = false;
  for (; p < end; ++p) {
    if (in_string) {
      if (*p == '\\') ++p;
      else if (*p == '"') in_string = false;
    } else if (*p == '"') {
      in_string = true;
    } else if (*p == '[' || *p == '{') {
      if (depth == kMaxDepth) return "the header nests deeper than a safetensors header does";
      ++depth;
      array[depth] = *p == '[', items[depth] = 0;
    } else if (*p == ']' || *p == '}') {
      depth = std::max(depth - 1, 0);
    } else if (*p == ',' || *p == ':') {
      if (++values > kMaxValues) return "the header holds more than " + std::to_string(kMaxValues) + " values";
      if (*p == ',' && depth > 0 && array[depth] && ++items[depth] >= kMaxItems)
        return "an array in the header has more than " + std::to_string(kMaxItems) + " items";
    }
  }
  return "";
}

// Bytes per element of a safetensors dtype; 0 for one this reader does not know.
int64_t dtype_bytes(const std::string& d) {
  static const std::map<std::string, int64_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1}};
  const auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

// Elements of `shape`, or -1 if a dimension is negative or the count would pass 2^62.
int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t(1) << 62) / d)) return -1;
    n *= d;
  }
  return n;
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

// One tensor entry of the header; throws hddp::Error naming the file and the entry.
SafeTensor parse_entry(const std::string& path, const std::string& name, const read_json& e, uint64_t data_size,
                       uint64_t& begin, uint64_t& end) {
  const std::string where = "'" + path + "': tensor " + quote_input(name, 60);
  HDDP_CHECK(e.is_object(), where << " is not a JSON object");
  const auto dtype = e.find("dtype"), shape = e.find("shape"), offsets = e.find("data_offsets");
  HDDP_CHECK(dtype != e.end() && dtype->is_string(), where << " has no \"dtype\" string");
  HDDP_CHECK(shape != e.end() && shape->is_array(), where << " has no \"shape\" array");
  HDDP_CHECK(shape->size() <= kMaxDims, where << ": " << shape->size() << " dimensions, more than " << kMaxDims);
  HDDP_CHECK(offsets != e.end() && offsets->is_array() && offsets->size() == 2 && (*offsets)[0].is_number_unsigned() &&
                 (*offsets)[1].is_number_unsigned(),
             where << " has no \"data_offsets\" [begin, end] of two non-negative integers");
  SafeTensor t;
  t.name = name;
  t.dtype = dtype->get<std::string>();
  const int64_t esize = dtype_bytes(t.dtype);
  HDDP_CHECK(esize > 0, where << " has unknown dtype " << quote_input(t.dtype, 40));
  for (const read_json& d : *shape) {
    HDDP_CHECK(d.is_number_unsigned() && d.get<uint64_t>() <= (uint64_t(1) << 62),
               where << ": shape entries must be non-negative integers");
    t.shape.push_back(d.get<int64_t>());
  }
  const int64_t n = elements(t.shape);
  HDDP_CHECK(n >= 0 && n <= std::numeric_limits<int64_t>::max() / esize, where << ": shape " << shape_text(t.shape) << " is too large");
  begin = (*offsets)[0].get<uint64_t>(), end = (*offsets)[1].get<uint64_t>();
  HDDP_CHECK(begin <= end && end <= data_size, where << ": data_offsets [" << begin << ", " << end
                                                     << "] run past the data (" << data_size << " bytes)");
  HDDP_CHECK(end - begin == uint64_t(n * esize), where << ": data_offsets hold " << end - begin << " bytes, shape "
                                                       << shape_text(t.shape) << " of " << t.dtype << " needs "
                                                       << n * esize);
  return t;
}

}  // namespace

std::string encode_safetensors(const SafeTensors& st) {
  json header = json::object();
  if (!st.metadata.empty()) header[kMetadataKey] = st.metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafeTensor& t : st.tensors) {
    HDDP_CHECK_ARG(!t.name.empty() && t.name != kMetadataKey && names.insert(t.name).second,
                   "encode_safetensors: tensor names must be unique, non-empty and not " << kMetadataKey << ": '"
                                                                                          << t.name << "'");
    const int64_t esize = dtype_bytes(t.dtype), n = elements(t.shape);
    HDDP_CHECK_ARG(esize > 0 && n >= 0 && int64_t(t.data.size()) == n * esize,
                   "encode_safetensors: '" << t.name << "': " << t.data.size() << " bytes for " << t.dtype << " "
                                           << shape_text(t.shape));
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  const uint64_t n = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  out += h;
  for (const SafeTensor& t : st.tensors) out += t.data;
  return out;
}

namespace {

SafeTensors parse_checked(const std::string& bytes, const std::string& path) {
  HDDP_CHECK(bytes.size() >= 8, "'" << path << "' is not a safetensors file: " << bytes.size()
                                    << " bytes, less than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  HDDP_CHECK(n <= bytes.size() - 8, "'" << path << "' is truncated or not a safetensors file: its header length "
                                        << n << " runs past the end of its " << bytes.size() << " bytes");
  HDDP_CHECK(n <= kMaxHeader, "'" << path << "': header of " << n << " bytes, more than safetensors allows");
  const std::string shape = prescan(bytes.data() + 8, bytes.data() + 8 + n);
  HDDP_CHECK(shape.empty(), "'" << path << "': " << shape);
  const read_json header = read_json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(n), nullptr, /*exceptions=*/false);
  HDDP_CHECK(!header.is_discarded() && header.is_object(), "'" << path << "': the header is not a JSON object");
  const uint64_t data_size = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;
  SafeTensors st;
  struct Span {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Span> spans;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      HDDP_CHECK(value.is_object(), "'" << path << "': __metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        HDDP_CHECK(v.is_string(), "'" << path << "': __metadata__ value of " << quote_input(k, 60) << " is not a string");
        st.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    uint64_t b = 0, e = 0;
    st.tensors.push_back(parse_entry(path, key, value, data_size, b, e));
    spans.push_back({b, e, st.tensors.size() - 1});
  }
  // The data is indexed entirely, without holes or overlaps (the format's rule).
  std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin || (a.begin == b.begin && a.end < b.end); });
  uint64_t at = 0;
  for (const Span& s : spans) {
    const std::string name = quote_input(st.tensors[s.index].name, 60);
    HDDP_CHECK(s.begin >= at, "'" << path << "': tensor " << name << " overlaps the tensor before it (data_offsets ["
                                  << s.begin << ", " << s.end << "])");
    HDDP_CHECK(s.begin == at, "'" << path << "': " << s.begin - at << " bytes before tensor " << name
                                  << " belong to no tensor");
    st.tensors[s.index].data.assign(data + s.begin, s.end - s.begin);
    at = s.end;
  }
  HDDP_CHECK(at == data_size, "'" << path << "': " << data_size - at << " bytes after the last tensor belong to no tensor");
  std::vector<SafeTensor> ordered;  // in data order
  for (const Span& s : spans) ordered.push_back(std::move(st.tensors[s.index]));
  st.tensors = std::move(ordered);
  return st;
}

}  // namespace

SafeTensors parse_safetensors(const std::string& bytes, const std::string& path) {
  try {
    return parse_checked(bytes, path);
  } catch (const nlohmann::json::exception& e) {  // a type the checks above did not foresee
    HDDP_CHECK(false, "'" << path << "': malformed safetensors header: " << quote_input(e.what()));
  } catch (const std::bad_alloc&) {
    HDDP_CHECK(false, "'" << path << "': out of memory reading its header");
  }
}

namespace {
// The tensor's shape as PyTorch holds it: the view's own, else a ".bias" column as a vector
// (arenas built by hand), else rows x cols.
std::vector<int64_t> torch_shape(const ParamView& v) {
  if (!v.shape.empty()) return v.shape;
  if (v.cols == 1 && v.name.size() > 5 && v.name.ends_with(".bias")) return {v.rows};
  return {v.rows, v.cols};
}
}  // namespace

void save_weights(const std::string& path, const ParamArena<float>& params,
                  const std::map<std::string, std::string>& metadata) {
  SafeTensors st;
  st.metadata = metadata;
  for (size_t i = 0; i < params.num_tensors(); ++i) {
    const ParamView& v = params.view(i);
    SafeTensor t{v.name, "F32", torch_shape(v), {}};
    t.data.assign(reinterpret_cast<const char*>(params.param(i)), size_t(v.size()) * sizeof(float));
    st.tensors.push_back(std::move(t));
  }
  write_file_atomic(path, encode_safetensors(st));
}

void load_weights(const SafeTensors& st, const std::string& path, ParamArena<float>& params) {
  std::vector<const SafeTensor*> of(params.num_tensors(), nullptr);
  for (const SafeTensor& t : st.tensors) {
    const std::optional<size_t> i = params.find(t.name);
    HDDP_CHECK(i.has_value(), "'" << path << "' holds tensor " << quote_input(t.name, 60) << ", which the model does not have");
    const ParamView& v = params.view(*i);
    HDDP_CHECK(t.shape == torch_shape(v), "'" << path << "': tensor " << quote_input(t.name, 60) << " has shape " << shape_text(t.shape)
                                               << ", the model's is " << shape_text(torch_shape(v)));
    HDDP_CHECK(t.dtype == "F32", "'" << path << "': tensor " << quote_input(t.name, 60) << " is " << t.dtype
                                     << "; hddp loads F32 (in PyTorch: model.float() before saving)");
    of[*i] = &t;
  }
  for (size_t i = 0; i < of.size(); ++i)
    HDDP_CHECK(of[i], "'" << path << "' has no tensor '" << params.view(i).name << "', which the model needs");
  for (size_t i = 0; i < of.size(); ++i) std::memcpy(params.param(i), of[i]->data.data(), of[i]->data.size());
}

}  // namespace hddp
