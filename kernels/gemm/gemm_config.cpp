// The choice of micro-kernel set and blocking per CPU (gemm_config.h).
#include <hddp/kernels/gemm/gemm_config.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <hddp/kernels/check.h>

namespace hddp::detail {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "hddp-gemm-wisdom-1";

template <class T>
const KernelSet<T>& set_of(const Kernels& k) { return kernel_set<T>(k); }

// MC/KC/NC from a wisdom object {"MC": .., "KC": .., "NC": ..} over the set's MR/NR, checked.
Blocking blocking_from(const json& j, const Blocking& base, const std::string& where) {
  HDDP_CHECK_ARG(j.is_object(), where << ": expected an object {\"MC\": .., \"KC\": .., \"NC\": ..}");
  Blocking b = base;
  for (auto [key, field, unit, cap] : {std::tuple{"MC", &b.MC, base.MR, int64_t(1) << 14},
                                       std::tuple{"KC", &b.KC, int64_t(1), int64_t(1) << 14},
                                       std::tuple{"NC", &b.NC, base.NR, int64_t(1) << 18}}) {
    HDDP_CHECK_ARG(j.contains(key) && j[key].is_number_integer(), where << ": \"" << key << "\" missing or not an integer");
    const int64_t v = j[key].get<int64_t>();
    HDDP_CHECK_ARG(v > 0 && v <= cap && v % unit == 0,
                   where << ": " << key << " = " << v << " must be a positive multiple of " << unit << " up to " << cap);
    *field = v;
  }
  return b;
}

// "12x32, 8x32, 8x48": the tiles of a set, for messages.
template <class T>
std::string tile_names(const KernelSet<T>& ks) {
  std::string out;
  for (const Tile<T>& t : ks.tiles)
    out += (out.empty() ? "" : ", ") + std::to_string(t.blocking.MR) + "x" + std::to_string(t.blocking.NR);
  return out;
}

// A tile of `ks` with MC/KC/NC from a wisdom object {"MR": .., "NR": .., "MC": .., "KC": .., "NC": ..},
// checked; MR and NR may be left out, then they are those of `base`.
template <class T>
Tile<T> tile_from(const json& j, const KernelSet<T>& ks, const Tile<T>& base, const std::string& set_name,
                  const std::string& where) {
  HDDP_CHECK_ARG(j.is_object(), where << ": expected an object {\"MC\": .., \"KC\": .., \"NC\": ..}");
  int64_t mr_nr[2] = {base.blocking.MR, base.blocking.NR};
  for (int i = 0; i < 2; ++i) {
    const char* key = i ? "NR" : "MR";
    if (!j.contains(key)) continue;
    HDDP_CHECK_ARG(j[key].is_number_integer(), where << ": \"" << key << "\" is not an integer");
    mr_nr[i] = j[key].get<int64_t>();
  }
  const Tile<T>* t = find_tile(ks.tiles, mr_nr[0], mr_nr[1]);
  HDDP_CHECK_ARG(t != nullptr, where << ": " << mr_nr[0] << "x" << mr_nr[1] << " is not a micro-tile of the " << set_name
                                     << " set (it has " << tile_names(ks) << "); re-run gemm_tune");
  Tile<T> tile = *t;
  tile.blocking = blocking_from(j, t->blocking, where);
  return tile;
}

// The set for `name` on this CPU, or an error that says what to do.
const Kernels& runnable_set(const std::string& name, const std::string& where) {
  HDDP_CHECK_ARG(name == "avx512" || name == "avx2" || name == "portable",
                 where << ": unknown kernel set '" << name << "' (expected avx512, avx2 or portable); re-run gemm_tune");
  const std::string why = kernel_unsupported_reason(name);
  HDDP_CHECK_ARG(why.empty(), where << ": kernel set " << name << " cannot run here (" << why << ")");
  return *kernels_by_name(name);
}

// One precision's choice from the CPU's wisdom entry: {"kernel": .., "blocking": {set: {..}}}.
// forced non-empty: that set, with the entry's blocking for it when present.
template <class T>
KernelSet<T> from_wisdom(const json& entry, const std::string& forced, const std::string& where,
                         const char*& set_name) {
  HDDP_CHECK_ARG(entry.is_object() && entry.contains("kernel") && entry["kernel"].is_string(),
                 where << ": expected {\"kernel\": \"avx512|avx2|portable\", \"blocking\": {...}}");
  const std::string name = forced.empty() ? entry["kernel"].get<std::string>() : forced;
  const Kernels& k = runnable_set(name, where + ".kernel");
  set_name = k.name;
  KernelSet<T> ks = set_of<T>(k);
  if (entry.contains("blocking")) {
    const json& b = entry["blocking"];
    HDDP_CHECK_ARG(b.is_object(), where << ".blocking: expected an object keyed by kernel set");
    if (b.contains(name)) {
      const std::string at = where + ".blocking." + name;
      static_cast<Tile<T>&>(ks) = tile_from<T>(b[name], ks, ks, name, at);
      // The other shape classes (files written before they existed: the set's own rows).
      for (ShapeClass c : kShapeClasses) {
        const char* key = to_string(c);
        if (c != ShapeClass::General && b[name].contains(key))
          ks.tile(c) = tile_from<T>(b[name][key], ks, ks.tile(c), name, at + "." + key);
      }
    } else {
      HDDP_CHECK_ARG(!forced.empty(), where << ".blocking: no entry for its own kernel " << name);
    }
  }
  return ks;
}

}  // namespace

std::string describe_classes(const ClassBlocking& b) {
  std::string out;
  for (ShapeClass c : kShapeClasses) {
    if (c == ShapeClass::General) continue;
    char s[128];
    std::snprintf(s, sizeof s, "%s%s %lldx%lld MC %lld KC %lld NC %lld", out.empty() ? "" : ", ", to_string(c),
                  static_cast<long long>(b[c].MR), static_cast<long long>(b[c].NR), static_cast<long long>(b[c].MC),
                  static_cast<long long>(b[c].KC), static_cast<long long>(b[c].NC));
    out += s;
  }
  return out;
}

std::string describe(const char* set_name, const Blocking& b) {
  char s[160];
  std::snprintf(s, sizeof s, "%s %lldx%lld MC %lld KC %lld NC %lld", set_name, static_cast<long long>(b.MR),
                static_cast<long long>(b.NR), static_cast<long long>(b.MC), static_cast<long long>(b.KC),
                static_cast<long long>(b.NC));
  return s;
}

std::string wisdom_path() {
  if (const char* p = std::getenv("HDDP_GEMM_WISDOM")) return p;  // "" means none
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x) return std::string(x) + "/hddp/gemm_wisdom.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.config/hddp/gemm_wisdom.json";
  return "";
}

GemmConfig make_gemm_config(const std::string& forced, const std::string& wisdom_text,
                            const std::string& wisdom_origin, const std::string& cpu_key,
                            const CpuModel& cpu) {
  if (!forced.empty()) {  // checked first
    const std::string why = kernel_unsupported_reason(forced);  // throws on an unknown name
    HDDP_CHECK_ARG(why.empty(), "HDDP_GEMM_KERNEL=" << forced << ": " << why << "; unset it to use the kernel chosen for this CPU");
  }
  GemmConfig c{gemm_kernels_portable(), "portable", "portable", ""};

  // 2. Wisdom (1. forced, with wisdom's blocking for it).
  if (!wisdom_text.empty()) {
    json w;
    try {
      w = json::parse(wisdom_text);
    } catch (const json::exception& e) {
      HDDP_CHECK_ARG(false, "GEMM wisdom " << wisdom_origin << ": not JSON (" << e.what()
                                           << "); re-run gemm_tune, or delete the file");
    }
    HDDP_CHECK_ARG(w.is_object() && w.value("format", "") == kFormat && w.contains("cpus") && w["cpus"].is_object(),
                   "GEMM wisdom " << wisdom_origin << ": not a " << kFormat
                                  << " file ({\"format\": ..., \"cpus\": {...}}); re-run gemm_tune, or delete the file");
    if (w["cpus"].contains(cpu_key)) {
      const json& e = w["cpus"][cpu_key];
      const std::string where = "GEMM wisdom " + wisdom_origin + " [\"" + cpu_key + "\"]";
      HDDP_CHECK_ARG(e.is_object() && e.contains("float") && e.contains("double"),
                     where << ": expected \"float\" and \"double\" entries; re-run gemm_tune");
      c.kernels.s = from_wisdom<float>(e["float"], forced, where + ".float", c.set_s);
      c.kernels.d = from_wisdom<double>(e["double"], forced, where + ".double", c.set_d);
      c.kernels.name = c.set_s;
      c.source = (forced.empty() ? "" : "HDDP_GEMM_KERNEL=" + forced + ", ") + "wisdom " + wisdom_origin;
      return c;
    }
  }
  // 1. Forced, without wisdom for this CPU: the set's own blocking.
  if (!forced.empty()) {
    c.kernels = *kernels_by_name(forced);
    c.set_s = c.set_d = c.kernels.name;
    c.source = "HDDP_GEMM_KERNEL=" + forced;
    return c;
  }
  // 3. The built-in table.
  for (const CpuChoice& row : kCpuChoices) {
    if (cpu.vendor != row.vendor || cpu.family != row.family || cpu.model < row.model_lo || cpu.model > row.model_hi)
      continue;
    const Kernels* ks = kernels_by_name(row.set_s);
    const Kernels* kd = kernels_by_name(row.set_d);
    if (!ks || !kd) continue;  // e.g. AVX-512 disabled by the OS: the next rule
    c.kernels.s = make_kernel_set(ks->s.tiles, row.s, ks->s.small);
    c.kernels.d = make_kernel_set(kd->d.tiles, row.d, kd->d.small);
    c.set_s = ks->name, c.set_d = kd->name, c.kernels.name = c.set_s;
    c.source = std::string("built-in table: ") + row.why;
    return c;
  }
  // 4. The widest set.
  c.kernels = *kernels_by_name(std::string(isa_widest(kGemmIsa)));
  c.set_s = c.set_d = c.kernels.name;
  c.source = "built-in: the widest set, its default blocking";
  return c;
}

const GemmConfig& gemm_config() {
  static const GemmConfig c = [] {
    const char* f = std::getenv("HDDP_GEMM_KERNEL");
    const std::string path = wisdom_path();
    std::string text;
    if (!path.empty()) {
      std::ifstream in(path);
      if (in) {
        std::ostringstream os;
        os << in.rdbuf();
        text = os.str();
        HDDP_CHECK_ARG(!text.empty(), "GEMM wisdom " << path << " is empty; re-run gemm_tune, or delete the file");
      }
    }
    return make_gemm_config(f ? f : "", text, path, cpu_model_key(), cpu_model());
  }();
  return c;
}

}  // namespace hddp::detail
