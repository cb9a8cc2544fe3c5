// gemm_tune: measures which micro-kernel set and which MC/KC/NC run hddp's GEMM fastest on this
// CPU and stores the choice in the wisdom file the library reads (kernels/gemm/gemm_config.h),
// under this CPU's model; entries of other CPUs in the file are kept. ATLAS's install-time
// search and FFTW's wisdom are the models.
//
// The search, per precision, per set this CPU runs and per shape class (kernels/gemm/gemm_blocking.h:
// general, scored on a square and a training step's products; narrow, thin and long_k, on a
// CNN's convolution and Linear products): coordinate descent from the set's built-in tile, first over
// the set's other micro-tiles, then KC, MC, NC, then KC again. A candidate replaces the
// incumbent only if it is faster by more than --margin on the geometric mean over the scoring
// shapes, measured side by side (alternating calls, medians), so that a VM changing speed
// between two measurements does not pick a winner. Then the sets' winners against each other
// (geometric mean over all classes' shapes).
// Threads: OMP_NUM_THREADS (tune with the count the jobs use: 16 on a 16-core node).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/util.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_config.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

namespace {

using hddp::Trans;
using hddp::median;
using hddp::detail::Blocking;
using hddp::detail::Kernels;
using hddp::detail::kShapeClasses;
using hddp::detail::ShapeClass;
using hddp::detail::Tile;
using nlohmann::json;

struct Shape {
  Trans ta, tb;
  int64_t M, N, K;
};

struct Options {
  std::string out;
  bool quick = false, show = false, dry_run = false;
  int rounds = 3;
  double margin = 0.01;
};

// Scoring shapes of the general class: a square and a training step's thin products (batch x
// width, NN/NT/TN).
std::vector<Shape> scoring_shapes(bool is_double, bool quick) {
  if (quick) return {{Trans::No, Trans::No, 160, 192, 200}, {Trans::No, Trans::Yes, 144, 200, 160}};
  std::vector<Shape> s{{Trans::No, Trans::No, 1024, 1024, 1024},
                       {Trans::No, Trans::No, 256, 1024, 1024},
                       {Trans::No, Trans::Yes, 256, 1024, 1024},
                       {Trans::Yes, Trans::No, 256, 1024, 1024}};
  if (!is_double) s.push_back({Trans::No, Trans::Yes, 256, 4096, 4096});
  return s;
}

// Scoring shapes of the other classes: a Fashion-MNIST CNN's products (bench_gemm's conv* and
// fc1_* rows; batch 64, im2col): narrow, the forward passes of its convolutions (12544 x 64 x 288
// and 50176 x 32 x 9, NT); thin, the second convolution's weight gradient (TN) and input gradient
// (NN), Linear(3136, 128)'s (NN, TN); long_k, Linear(3136, 128)'s forward (NT).
std::vector<Shape> class_shapes(ShapeClass c, bool is_double, bool quick) {
  switch (c) {
    case ShapeClass::General: return scoring_shapes(is_double, quick);
    case ShapeClass::Narrow:
      if (quick) return {{Trans::No, Trans::Yes, 512, 64, 96}};
      return {{Trans::No, Trans::Yes, 12544, 64, 288}, {Trans::No, Trans::Yes, 50176, 32, 9}};
    case ShapeClass::Thin:
      if (quick) return {{Trans::Yes, Trans::No, 64, 192, 512}};
      return {{Trans::Yes, Trans::No, 64, 288, 12544}, {Trans::No, Trans::No, 12544, 288, 64},
              {Trans::No, Trans::No, 64, 3136, 128}, {Trans::Yes, Trans::No, 128, 3136, 64}};
    case ShapeClass::LongK:
      if (quick) return {{Trans::No, Trans::Yes, 64, 96, 512}};
      return {{Trans::No, Trans::Yes, 64, 128, 3136}};
  }
  return {};
}

template <class T>
struct Operands {
  std::vector<T> A, B, C;
  explicit Operands(const Shape& s) : A(s.M * s.K), B(s.K * s.N), C(s.M * s.N) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> d(-1, 1);
    for (auto& x : A) x = T(d(rng));
    for (auto& x : B) x = T(d(rng));
  }
};

// Seconds per call of gemm_blocked on `k`: calls repeated until `budget` seconds have passed.
template <class T>
double seconds_per_call(const Kernels& k, const Shape& s, Operands<T>& o, double budget) {
  const int64_t lda = s.ta == Trans::No ? s.K : s.M, ldb = s.tb == Trans::No ? s.N : s.K;
  auto call = [&] {
    hddp::detail::gemm_blocked_with(k, s.ta, s.tb, s.M, s.N, s.K, T(1), o.A.data(), lda, o.B.data(), ldb,
                                    T(0), o.C.data(), s.N);
  };
  call();  // warm: packing buffers, caches
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  int64_t n = 0;
  double elapsed = 0;
  do {
    call();
    ++n;
    elapsed = hddp::seconds_since(t0);
  } while (elapsed < budget);
  return elapsed / double(n);
}

// Speed of `cand` over `inc` (> 1: cand faster): geometric mean over the shapes of the ratio
// of medians, the two measured alternately `rounds` times.
template <class T>
double speedup(const Kernels& inc, const Kernels& cand, const std::vector<Shape>& shapes,
               std::vector<Operands<T>>& ops, const Options& opt) {
  const double budget = opt.quick ? 0.002 : 0.015;
  double log_sum = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<double> a, b;
    for (int r = 0; r < opt.rounds; ++r) {
      a.push_back(seconds_per_call<T>(inc, shapes[i], ops[i], budget));
      b.push_back(seconds_per_call<T>(cand, shapes[i], ops[i], budget));
    }
    log_sum += std::log(median(a) / median(b));
  }
  return std::exp(log_sum / double(shapes.size()));
}

// GFLOP/s of `k` (geometric mean over the shapes), for the report.
template <class T>
double gflops(const Kernels& k, const std::vector<Shape>& shapes, std::vector<Operands<T>>& ops, const Options& opt) {
  double log_sum = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    std::vector<double> t;
    for (int r = 0; r < opt.rounds; ++r) t.push_back(seconds_per_call<T>(k, shapes[i], ops[i], opt.quick ? 0.002 : 0.015));
    const Shape& s = shapes[i];
    log_sum += std::log(2.0 * double(s.M) * double(s.N) * double(s.K) * 1e-9 / median(t));
  }
  return std::exp(log_sum / double(shapes.size()));
}

// The tile of one shape class in k's half for T.
template <class T>
Tile<T>& tile_of(Kernels& k, ShapeClass c) { return hddp::detail::kernel_set<T>(k).tile(c); }
template <class T>
const Tile<T>& tile_of(const Kernels& k, ShapeClass c) { return hddp::detail::kernel_set<T>(k).tile(c); }

// "avx512 narrow 8x32 MC 192 KC 256 NC 4096".
std::string describe_tile(const char* set, const Blocking& b, ShapeClass c) {
  return hddp::detail::describe((std::string(set) + " " + hddp::detail::to_string(c)).c_str(), b);
}

// Candidate values of one blocking parameter around the built-in ones.
std::vector<int64_t> candidates(char which, const Blocking& b, bool quick) {
  auto round_to = [](int64_t v, int64_t unit) { return std::max(unit, (v + unit / 2) / unit * unit); };
  std::vector<int64_t> v;
  if (which == 'K') v = quick ? std::vector<int64_t>{64, 128} : std::vector<int64_t>{128, 192, 256, 384, 512};
  if (which == 'M')
    for (int64_t f : quick ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{4, 8, 12, 16, 24})
      v.push_back(f * b.MR);
  if (which == 'N')
    for (int64_t n : quick ? std::vector<int64_t>{256, 512} : std::vector<int64_t>{2048, 4096, 8192})
      v.push_back(round_to(n, b.NR));
  return v;
}

// The best tile and blocking of one set and shape class for precision T, from its built-in one:
// the set's other micro-tiles (each with its own row's blocking), then KC, MC, NC, KC.
template <class T>
Kernels tune_set(const Kernels& set, ShapeClass cls, const std::vector<Shape>& shapes, std::vector<Operands<T>>& ops,
                 const Options& opt) {
  Kernels best = set;
  auto report = [&](const Blocking& b, double s) {
    std::printf("  %-7s %-58s %.3fx%s\n", sizeof(T) == 4 ? "float" : "double", describe_tile(set.name, b, cls).c_str(),
                s, s > 1 + opt.margin ? "  <- better" : "");
    std::fflush(stdout);
  };
  for (const Tile<T>& t : hddp::detail::kernel_set<T>(set).tiles) {
    const Blocking& now = tile_of<T>(best, cls).blocking;
    if (t.blocking.MR == now.MR && t.blocking.NR == now.NR) continue;
    Kernels cand = best;
    tile_of<T>(cand, cls) = t;
    const double s = speedup<T>(best, cand, shapes, ops, opt);
    report(t.blocking, s);
    if (s > 1 + opt.margin) best = cand;
  }
  const char* order = opt.quick ? "KM" : "KMNK";
  for (const char* p = order; *p; ++p) {
    const char which = *p;
    for (int64_t v : candidates(which, tile_of<T>(best, cls).blocking, opt.quick)) {
      Kernels cand = best;
      Blocking& b = tile_of<T>(cand, cls).blocking;
      int64_t& field = which == 'K' ? b.KC : which == 'M' ? b.MC : b.NC;
      if (field == v) continue;
      field = v;
      const double s = speedup<T>(best, cand, shapes, ops, opt);
      report(b, s);
      if (s > 1 + opt.margin) best = cand;
    }
  }
  return best;
}

// {"MR": .., "NR": .., "MC": .., "KC": .., "NC": ..}: one tile's wisdom entry.
json tile_json(const Blocking& b) {
  return {{"MR", b.MR}, {"NR", b.NR}, {"MC", b.MC}, {"KC", b.KC}, {"NC", b.NC}};
}

// Each runnable set tuned for T, per shape class, then the winners against each other over all
// classes' shapes; returns the chosen Kernels (T's half set) and records the report in `entry`.
template <class T>
Kernels choose(const std::vector<const Kernels*>& sets, const Options& opt, json& entry) {
  const bool is_double = sizeof(T) == 8;
  const char* prec = is_double ? "double" : "float";
  constexpr int kN = int(std::size(kShapeClasses));
  std::vector<Shape> shapes[kN];
  std::vector<Operands<T>> ops[kN];
  for (int c = 0; c < kN; ++c) {
    shapes[c] = class_shapes(kShapeClasses[c], is_double, opt.quick);
    for (const Shape& s : shapes[c]) ops[c].emplace_back(s);
  }
  std::vector<Kernels> tuned;
  json blocking = json::object(), score = json::object();
  for (const Kernels* set : sets) {
    Kernels t = *set;
    json& sc = score[set->name];
    for (int c = 0; c < kN; ++c) {
      const ShapeClass cls = kShapeClasses[c];
      std::printf("%s, %s set: built-in %s\n", prec, set->name,
                  describe_tile(set->name, tile_of<T>(*set, cls).blocking, cls).c_str());
      Kernels found = tune_set<T>(*set, cls, shapes[c], ops[c], opt);
      // The search's winner against the start, side by side once more: steps that each looked
      // better may not add up, and then the built-in tile stays.
      double vs_builtin = speedup<T>(*set, found, shapes[c], ops[c], opt);
      if (vs_builtin <= 1 + opt.margin) {
        std::printf("  %s is %.3fx the built-in: keeping the built-in\n",
                    describe_tile(set->name, tile_of<T>(found, cls).blocking, cls).c_str(), vs_builtin);
        found = *set, vs_builtin = 1;
      }
      tile_of<T>(t, cls) = tile_of<T>(found, cls);
      sc[c == 0 ? std::string("vs_builtin") : std::string(hddp::detail::to_string(cls)) + "_vs_builtin"] =
          std::round(vs_builtin * 1000) / 1000;
      std::printf("  -> %s: %.3fx the built-in\n", describe_tile(set->name, tile_of<T>(t, cls).blocking, cls).c_str(),
                  vs_builtin);
    }
    json b = tile_json(tile_of<T>(t, ShapeClass::General).blocking);
    for (ShapeClass cls : kShapeClasses)
      if (cls != ShapeClass::General) b[hddp::detail::to_string(cls)] = tile_json(tile_of<T>(t, cls).blocking);
    blocking[set->name] = b;
    tuned.push_back(t);
  }
  // The sets' winners against each other: geometric mean over every class's shapes.
  auto overall = [&](const Kernels& inc, const Kernels& cand) {
    double log_sum = 0, n = 0;
    for (int c = 0; c < kN; ++c) {
      log_sum += double(shapes[c].size()) * std::log(speedup<T>(inc, cand, shapes[c], ops[c], opt));
      n += double(shapes[c].size());
    }
    return std::exp(log_sum / n);
  };
  size_t win = 0;
  for (size_t i = 1; i < tuned.size(); ++i) {
    const double s = overall(tuned[win], tuned[i]);
    std::printf("%s: %s over %s: %.3fx\n", prec, tuned[i].name, tuned[win].name, s);
    if (s > 1 + opt.margin) win = i;
  }
  std::printf("%s: chosen %s", prec, tuned[win].name);
  for (int c = 0; c < kN; ++c) {
    const ShapeClass cls = kShapeClasses[c];
    const double g = gflops<T>(tuned[win], shapes[c], ops[c], opt);
    score[c == 0 ? std::string("gflops_geomean") : std::string(hddp::detail::to_string(cls)) + "_gflops_geomean"] =
        std::round(g * 10) / 10;
    std::printf("; %s, %.1f GFLOP/s (geometric mean over %zu shapes)",
                describe_tile(tuned[win].name, tile_of<T>(tuned[win], cls).blocking, cls).c_str(), g, shapes[c].size());
  }
  std::printf("\n\n");
  entry[prec] = {{"kernel", tuned[win].name}, {"blocking", blocking}, {"score", score}};
  return tuned[win];
}

// The file with this CPU's entry replaced, written atomically (hddp::write_file_atomic).
void write_wisdom(const std::string& path, const std::string& key, const json& entry) {
  namespace fs = std::filesystem;
  json w = {{"format", "hddp-gemm-wisdom-1"}, {"cpus", json::object()}};
  if (std::ifstream in(path); in) {
    std::ostringstream os;
    os << in.rdbuf();
    try {
      w = json::parse(os.str());
    } catch (const json::exception& e) {
      throw std::runtime_error(path + " exists but is not JSON (" + e.what() + "); move it away and re-run");
    }
    if (!w.is_object() || w.value("format", "") != "hddp-gemm-wisdom-1" || !w.contains("cpus") || !w["cpus"].is_object())
      throw std::runtime_error(path + " exists but is not an hddp GEMM wisdom file; move it away and re-run");
  }
  w["cpus"][key] = entry;
  const fs::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  if (ec) throw std::runtime_error("cannot create " + p.parent_path().string() + ": " + ec.message());
  hddp::write_file_atomic(path, w.dump(2) + "\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  CLI::App app{"gemm_tune: measure the fastest GEMM micro-kernel set, micro-tile and MC/KC/NC blocking on this CPU,\n"
               "per shape class (general; narrow, thin, long_k: a CNN's products), and store them in the wisdom file\n"
               "hddp's GEMM reads (kernels/gemm/gemm_config.h).\n"
               "Threads: OMP_NUM_THREADS (tune with the count your jobs use). A few minutes."};
  app.add_option("--out", opt.out, "wisdom file to write (default: the one the library reads, " +
                                       (hddp::gemm_wisdom_path().empty() ? std::string("none here") : hddp::gemm_wisdom_path()) + ")")
      ->option_text("FILE");
  app.add_flag("--quick", opt.quick, "small shapes and a short search (a smoke test, not a tuning)");
  app.add_option("--rounds", opt.rounds, "alternating measurements per comparison (default 3)")
      ->check(CLI::Range(1, 100))->option_text("N");
  app.add_option("--margin", opt.margin, "speed-up a candidate needs to replace the incumbent (default 0.01)")
      ->check(CLI::Range(0.0, 1.0))->option_text("X");
  app.add_flag("--dry-run", opt.dry_run, "search and print, write nothing");
  app.add_flag("--show", opt.show, "print this CPU's key and the choice in effect, then exit");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::string key = hddp::detail::cpu_model_key();
    if (opt.show) {
      const hddp::detail::Kernels& k = hddp::detail::cpu_kernels();
      std::printf("cpu: %s\nwisdom: %s\nthreads: %d\nchoice: %s\nclasses: float %s; double %s\n", key.c_str(),
                  hddp::gemm_wisdom_path().empty() ? "(none)" : hddp::gemm_wisdom_path().c_str(),
                  omp_get_max_threads(), hddp::gemm_config_description().c_str(),
                  hddp::detail::describe_classes(k.s.blockings()).c_str(),
                  hddp::detail::describe_classes(k.d.blockings()).c_str());
      return 0;
    }
    if (opt.out.empty()) opt.out = hddp::gemm_wisdom_path();
    if (opt.out.empty() && !opt.dry_run) {
      std::fprintf(stderr, "gemm_tune: no wisdom file to write (HDDP_GEMM_WISDOM is empty and HOME unset): pass --out FILE\n");
      return 2;
    }
    std::vector<const Kernels*> sets;
    for (const char* name : {"avx512", "avx2"})
      if (const Kernels* k = hddp::detail::kernels_by_name(name)) sets.push_back(k);
    if (sets.empty()) sets.push_back(hddp::detail::kernels_by_name("portable"));
    std::printf("gemm_tune: %s, %d thread(s), %s search; sets:", key.c_str(), omp_get_max_threads(),
                opt.quick ? "quick" : "full");
    for (const Kernels* k : sets) std::printf(" %s", k->name);
    std::printf("\n\n");
    json entry;
    choose<float>(sets, opt, entry);
    choose<double>(sets, opt, entry);
    char when[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    entry["tuned"] = when;
    entry["threads"] = omp_get_max_threads();
    entry["search"] = opt.quick ? "quick" : "full";
    if (opt.dry_run) {
      std::printf("--dry-run: not written. The entry:\n%s\n", entry.dump(2).c_str());
      return 0;
    }
    write_wisdom(opt.out, key, entry);
    std::printf("wrote %s [\"%s\"]\nhddp's GEMM uses it from the next process on; check with: gemm_tune --show%s\n",
                opt.out.c_str(), key.c_str(),
                opt.out == hddp::gemm_wisdom_path() ? "" : (" (with HDDP_GEMM_WISDOM=" + opt.out + ")").c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gemm_tune: %s\n", e.what());
    return 1;
  }
  return 0;
}
