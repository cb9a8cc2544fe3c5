#include <hddp/core/checkpoint.h>
#include <hddp/core/util.h>

#include <climits>
#include <cmath>
#include <cstring>

#include <hddp/kernels/check.h>

namespace hddp {

namespace {

const std::string kPrefix = "ckpt.";
const std::string kIdPrefix = "ckpt.id.";
const std::string kRecPrefix = "ckpt.rec.";
constexpr size_t kMaxIdName = 256;
// An identity value in identity_diff's text: a file's value may be of any size.
constexpr size_t kMaxShown = 1024;

// One u64 entry; throws hddp::Error naming the file and key when missing or malformed.
uint64_t get_u64(const Meta& meta, const std::string& path, const std::string& key) {
  auto it = meta.find(key);
  HDDP_CHECK(it != meta.end(), "'" << path << "' is not a complete training checkpoint: entry '" << key << "' is missing");
  HDDP_CHECK(it->second.size() == 8, "'" << path << "': checkpoint entry '" << key << "' has " << it->second.size()
                                         << " bytes, expected 8 (one u64)");
  uint64_t v;
  std::memcpy(&v, it->second.data(), 8);
  return v;
}

const std::string& get_bytes(const Meta& meta, const std::string& path, const std::string& key) {
  auto it = meta.find(key);
  HDDP_CHECK(it != meta.end(), "'" << path << "' is not a complete training checkpoint: entry '" << key << "' is missing");
  return it->second;
}

}  // namespace

std::string previous_checkpoint(const std::string& path) { return path + ".prev"; }

void save_checkpoint(const std::string& path, const ParamArena<float>& params, Optimizer<float>& opt,
                     const TrainState& st, CheckpointWrite how) {
  HDDP_CHECK_ARG(st.world_size >= 1 && st.world_size <= kMaxWorldSize,
                 "save_checkpoint: world size " << st.world_size << " outside [1, " << kMaxWorldSize << "]");
  HDDP_CHECK_ARG(st.step >= 0, "save_checkpoint: negative step " << st.step);
  HDDP_CHECK_ARG(st.rng.empty() || st.rng.size() == size_t(st.world_size),
                 "save_checkpoint: " << st.rng.size() << " RNG states for " << st.world_size << " ranks");
  Meta meta;
  meta["ckpt.version"] = encode_u64s({kCheckpointVersion});
  meta["ckpt.step"] = encode_u64s({uint64_t(st.step)});
  meta["ckpt.world_size"] = encode_u64s({uint64_t(st.world_size)});
  std::vector<uint64_t> rng;
  for (const Rng::State& s : st.rng) {
    HDDP_CHECK_ARG(s[0] | s[1] | s[2] | s[3], "save_checkpoint: an all-zero RNG state");
    rng.insert(rng.end(), s.begin(), s.end());
  }
  meta["ckpt.rng"] = encode_u64s(rng);
  for (const auto& [name, value] : st.identity) {
    HDDP_CHECK_ARG(!name.empty() && name.size() <= kMaxIdName, "save_checkpoint: identity name must have 1.."
                                                                    << kMaxIdName << " bytes");
    meta[kIdPrefix + name] = value;
  }
  for (const auto& [name, value] : st.records) {
    HDDP_CHECK_ARG(!name.empty() && name.size() <= kMaxIdName, "save_checkpoint: record name must have 1.."
                                                                    << kMaxIdName << " bytes");
    meta[kRecPrefix + name] = value;
  }
  AtomicWriteOptions w;
  w.keep_previous = how.keep_previous ? previous_checkpoint(path) : "";
  w.remove_stale = true;
  // Test hooks (HDDP_TEST_PAUSE): a write stopped half-way, or between the two renames.
  w.at = [](const char* moment) { test_pause((std::string("checkpoint-") + moment).c_str()); };
  write_file_atomic(path, encode_state<float>(path, params, &opt, meta), w);
}

Checkpoint read_checkpoint(const std::string& path) { return parse_checkpoint(read_file(path), path); }

Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path) {
  Checkpoint c;
  c.file = parse_tensor_file(bytes, path);
  const Meta& m = c.file.meta;
  HDDP_CHECK(m.count("ckpt.version"), "'" << path << "' is an hddp tensor file but not a training checkpoint "
                                             "(no 'ckpt.version' entry; saved by save_state?)");
  const uint64_t version = get_u64(m, path, "ckpt.version");
  HDDP_CHECK(version == kCheckpointVersion, "'" << path << "' has checkpoint version " << version
                                                << "; this build reads version " << kCheckpointVersion);
  HDDP_CHECK(c.file.dtype == DType::Float32, "'" << path << "' holds " << to_string(c.file.dtype)
                                                 << " values; training checkpoints are float32");
  TrainState& st = c.state;
  const uint64_t step = get_u64(m, path, "ckpt.step"), world = get_u64(m, path, "ckpt.world_size");
  HDDP_CHECK(world >= 1 && world <= uint64_t(kMaxWorldSize),
             "'" << path << "': checkpoint world size " << world << " outside [1, " << kMaxWorldSize << "]");
  HDDP_CHECK(step <= uint64_t(INT64_MAX), "'" << path << "': checkpoint step " << step << " is out of range");
  st.world_size = int(world);
  st.step = int64_t(step);
  const std::string& rng = get_bytes(m, path, "ckpt.rng");
  HDDP_CHECK(rng.empty() || rng.size() == 32 * world, "'" << path << "': entry 'ckpt.rng' has " << rng.size()
                                                           << " bytes, expected 0 or " << 32 * world << " (4 u64 for each of "
                                                           << world << " ranks)");
  st.rng.resize(rng.size() / 32);
  for (size_t r = 0; r < st.rng.size(); ++r) {
    std::memcpy(st.rng[r].data(), rng.data() + 32 * r, 32);
    const Rng::State& s = st.rng[r];
    HDDP_CHECK(s[0] | s[1] | s[2] | s[3], "'" << path << "': rank " << r << "'s RNG state is all zero (invalid)");
  }
  for (const auto& [key, value] : m)
    if (key.compare(0, kIdPrefix.size(), kIdPrefix) == 0) {
      const std::string name = key.substr(kIdPrefix.size());
      HDDP_CHECK(!name.empty() && name.size() <= kMaxIdName,
                 "'" << path << "': malformed identity entry " << quote_input(key, 60));
      st.identity[name] = value;
    } else if (key.compare(0, kRecPrefix.size(), kRecPrefix) == 0) {
      const std::string name = key.substr(kRecPrefix.size());
      HDDP_CHECK(!name.empty() && name.size() <= kMaxIdName,
                 "'" << path << "': malformed record entry " << quote_input(key, 60));
      st.records[name] = value;
    }
  return c;
}

std::string identity_diff(const TrainState& saved, int world_size, const std::map<std::string, std::string>& id) {
  std::string out;
  auto add = [&](const std::string& name, const std::string& then, const std::string& now) {
    out += (out.empty() ? "" : "; ") + name + ": " + then + " in the checkpoint, " + now + " now";
  };
  if (saved.world_size != world_size)
    add("world size (MPI ranks)", std::to_string(saved.world_size), std::to_string(world_size));
  std::map<std::string, std::pair<std::string, std::string>> all;
  for (const auto& [k, v] : saved.identity) all[k].first = v;
  for (const auto& [k, v] : id) all[k].second = v;
  for (const auto& [k, v] : all) {
    const bool in_saved = saved.identity.count(k), in_now = id.count(k);
    if (in_saved != in_now || v.first != v.second)
      add(k, in_saved ? quote_input(v.first, kMaxShown) : "(none)", in_now ? quote_input(v.second, kMaxShown) : "(none)");
  }
  return out;
}

void restore_checkpoint(const Checkpoint& c, const std::string& path, ParamArena<float>& params, Optimizer<float>& opt) {
  HDDP_CHECK(c.file.dtype == DType::Float32, "'" << path << "' holds " << to_string(c.file.dtype) << " values");
  // A checkpoint is only ever written from finite state; anything else was not written by
  // this program (the checksum was recomputed) and would poison training.
  for (const TensorData& t : c.file.tensors) {
    const size_t n = t.bytes.size() / sizeof(float);
    for (size_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, t.bytes.data() + i * sizeof(float), sizeof x);
      HDDP_CHECK(std::isfinite(x), "'" << path << "': tensor " << quote_input(t.name, 60) << " holds a non-finite value (" << x
                                       << ") at index " << i << "; a checkpoint never does");
    }
  }
  load_state<float>(c.file, path, params, &opt);
}

}  // namespace hddp
