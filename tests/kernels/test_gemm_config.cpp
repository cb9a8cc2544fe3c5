// The per-CPU choice of GEMM kernel set and blocking (kernels/gemm/gemm_config.h): the built-in
// table's rows (each class's tile one the set has), the shape classes, the order
// HDDP_GEMM_KERNEL > wisdom > table > widest, the classes' wisdom entries (and files without
// them), wisdom entries of other CPUs ignored, and malformed wisdom refused with a message naming
// the file and what to do.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include <hddp/kernels/gemm/gemm_blocking.h>
#include <hddp/kernels/gemm/gemm_config.h>

using namespace hddp::detail;

namespace {

const CpuModel kNoMatch{"NoSuchVendor", 1, 1};
const std::string kKey = "TestVendor family 1 model 2: Test CPU";

std::string widest() { return cpu_has_avx512() ? "avx512" : cpu_has_avx2_fma() ? "avx2" : "portable"; }

// A wisdom text with one entry for `key`: float and double both on `set`, with the given
// blocking objects (double's defaults to float's).
std::string wisdom(const std::string& set, const std::string& blocking_s, const std::string& key = kKey,
                   std::string blocking_d = "") {
  if (blocking_d.empty()) blocking_d = blocking_s;
  auto half = [&](const std::string& b) {
    return "{\"kernel\": \"" + set + "\", \"blocking\": {\"" + set + "\": " + b + "}}";
  };
  return "{\"format\": \"hddp-gemm-wisdom-1\", \"cpus\": {\"" + key + "\": {\"float\": " + half(blocking_s) +
         ", \"double\": " + half(blocking_d) + "}}}";
}

// {"MC": 3 MR, "KC": 77, "NC": 5 NR} for `set` and precision.
std::string odd_blocking(const std::string& set, bool is_double) {
  const Kernels& k = *kernels_by_name(set);
  const Blocking b = is_double ? k.d.blocking : k.s.blocking;
  return "{\"MC\": " + std::to_string(3 * b.MR) + ", \"KC\": 77, \"NC\": " + std::to_string(5 * b.NR) + "}";
}

// The MR of `set` for float (its built-in blocking).
int64_t mr_of(const std::string& set) { return kernel_set<float>(*kernels_by_name(set)).blocking.MR; }

void expect_refused(const std::string& text, const std::string& needle) {
  try {
    make_gemm_config("", text, "/some/wisdom.json", kKey, kNoMatch);
    ADD_FAILURE() << "accepted: " << text;
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("/some/wisdom.json"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << "no '" << needle << "' in: " << what;
  }
}

}  // namespace

// The tiles each set instantiates (gemm_blocking.h): what its class rows may name.
std::vector<Blocking> tiles_of(const std::string& set, bool is_double) {
  if (set == "avx512") {
    if (is_double) return {std::begin(kAvx512DoubleTiles), std::end(kAvx512DoubleTiles)};
    return {std::begin(kAvx512FloatTiles), std::end(kAvx512FloatTiles)};
  }
  if (set == "avx2") return {is_double ? kAvx2Double : kAvx2Float};
  return {is_double ? kPortableDouble : kPortableFloat};
}

void expect_rows_are_tiles(const std::string& set, bool is_double, const ClassBlocking& c, const std::string& why) {
  for (const Blocking& b : {c.general, c.narrow, c.thin, c.long_k}) {
    const std::vector<Blocking> tiles = tiles_of(set, is_double);
    EXPECT_TRUE(std::any_of(tiles.begin(), tiles.end(), [&](const Blocking& t) { return t.MR == b.MR && t.NR == b.NR; }))
        << why << ": " << b.MR << "x" << b.NR << " is not a tile of " << set;
    EXPECT_LE(b.MR, kMaxMR) << why;
    EXPECT_LE(b.NR, kMaxNR) << why;
    EXPECT_EQ(b.MC % b.MR, 0) << why;
    EXPECT_EQ(b.NC % b.NR, 0) << why;
    EXPECT_GT(b.KC, 0) << why;
  }
}

TEST(GemmConfig, BuiltInRowsMatchTheirSets) {
  for (const CpuChoice& row : kCpuChoices) {
    expect_rows_are_tiles(row.set_s, false, row.s, row.why);
    expect_rows_are_tiles(row.set_d, true, row.d, row.why);
    EXPECT_LE(row.model_lo, row.model_hi) << row.why;
  }
  expect_rows_are_tiles("avx512", false, kAvx512FloatClasses, "kAvx512FloatClasses");
  expect_rows_are_tiles("avx512", true, kAvx512DoubleClasses, "kAvx512DoubleClasses");
  expect_rows_are_tiles("avx2", false, kAvx2FloatClasses, "kAvx2FloatClasses");
  expect_rows_are_tiles("avx2", true, kAvx2DoubleClasses, "kAvx2DoubleClasses");
  expect_rows_are_tiles("portable", false, kPortableFloatClasses, "kPortableFloatClasses");
  expect_rows_are_tiles("portable", true, kPortableDoubleClasses, "kPortableDoubleClasses");
}

// The classes split at kNarrowMax: long_k where M and N are small, else narrow by N, else thin
// by M or K.
TEST(GemmConfig, ShapeClasses) {
  EXPECT_EQ(shape_class(12544, 64, 288), ShapeClass::Narrow);    // a convolution's forward
  EXPECT_EQ(shape_class(50176, 32, 9), ShapeClass::Narrow);
  EXPECT_EQ(shape_class(64, 128, 3136), ShapeClass::LongK);      // Linear(3136, 128) forward
  EXPECT_EQ(shape_class(64, 288, 12544), ShapeClass::Thin);      // a convolution's weight gradient
  EXPECT_EQ(shape_class(12544, 288, 64), ShapeClass::Thin);      // its input gradient
  EXPECT_EQ(shape_class(64, 3136, 128), ShapeClass::Thin);       // Linear(3136, 128)'s
  EXPECT_EQ(shape_class(128, 3136, 64), ShapeClass::Thin);
  EXPECT_EQ(shape_class(129, 129, 129), ShapeClass::General);
  EXPECT_EQ(shape_class(256, 4096, 4096), ShapeClass::General);  // a training step's
  EXPECT_EQ(shape_class(1024, 1024, 128), ShapeClass::Thin);
  EXPECT_EQ(shape_class(128, 1024, 1024), ShapeClass::Thin);
  EXPECT_EQ(shape_class(1024, 128, 1024), ShapeClass::Narrow);
  EXPECT_EQ(shape_class(128, 128, 1 << 20), ShapeClass::LongK);
  EXPECT_STREQ(to_string(ShapeClass::LongK), "long_k");
  EXPECT_EQ(&kAvx512FloatClasses[ShapeClass::General], &kAvx512FloatClasses.general);
  EXPECT_EQ(&kAvx512FloatClasses[ShapeClass::Narrow], &kAvx512FloatClasses.narrow);
  EXPECT_EQ(&kAvx512FloatClasses[ShapeClass::Thin], &kAvx512FloatClasses.thin);
  EXPECT_EQ(&kAvx512FloatClasses[ShapeClass::LongK], &kAvx512FloatClasses.long_k);
}

// Every set offers a tile per class, and the class tiles run (cpu_kernels: what is chosen here).
TEST(GemmConfig, EverySetHasItsClassTiles) {
  for (const char* name : {"avx512", "avx2", "portable"}) {
    const Kernels* k = kernels_by_name(name);
    if (!k) continue;
    for (ShapeClass c : kShapeClasses) {
      for (const Blocking& b : {k->s.tile(c).blocking, k->d.tile(c).blocking}) EXPECT_EQ(b.MC % b.MR, 0) << name;
      EXPECT_NE(k->s.tile(c).ukernel, nullptr) << name;
      EXPECT_NE(k->d.tile(c).ukernel, nullptr) << name;
      EXPECT_NE(find_tile(k->s.tiles, k->s.tile(c).blocking.MR, k->s.tile(c).blocking.NR), nullptr) << name;
    }
  }
  const Kernels& k = *kernels_by_name(widest());
  EXPECT_EQ(&tile_for(k.s, 12544, 64, 288), &k.s.narrow);
  EXPECT_EQ(&tile_for(k.s, 64, 288, 12544), &k.s.thin);
  EXPECT_EQ(&tile_for(k.s, 64, 128, 3136), &k.s.long_k);
  EXPECT_EQ(&tile_for(k.s, 1024, 1024, 1024), static_cast<const Tile<float>*>(&k.s));
}

TEST(GemmConfig, NothingMatchesTheWidestSet) {
  const GemmConfig c = make_gemm_config("", "", "", kKey, kNoMatch);
  EXPECT_EQ(std::string(c.set_s), widest());
  EXPECT_EQ(std::string(c.set_d), widest());
  EXPECT_NE(c.source.find("widest"), std::string::npos) << c.source;
}

// The Zen 4 row names the AVX2 set: taken where this CPU runs AVX2, else the next rule.
TEST(GemmConfig, BuiltInRowForItsCpu) {
  const GemmConfig c = make_gemm_config("", "", "", kKey, CpuModel{"AuthenticAMD", 25, 0x11});
  if (cpu_has_avx2_fma()) {
    EXPECT_STREQ(c.set_s, "avx2");
    EXPECT_EQ(c.kernels.s.blocking.KC, kAvx2Float.KC);
    EXPECT_EQ(c.kernels.s.thin.blocking.MR, kAvx2FloatClasses.thin.MR);
    EXPECT_EQ(c.kernels.d.narrow.blocking.NR, kAvx2DoubleClasses.narrow.NR);
    EXPECT_NE(c.source.find("Zen 4"), std::string::npos) << c.source;
  } else {
    EXPECT_EQ(std::string(c.set_s), widest());
    EXPECT_NE(c.source.find("widest"), std::string::npos) << c.source;
  }
}

TEST(GemmConfig, WisdomForThisCpuWins) {
  const std::string set = widest();
  const int64_t mr = mr_of(set);
  const GemmConfig c = make_gemm_config("", wisdom(set, odd_blocking(set, false), kKey, odd_blocking(set, true)),
                                        "/w.json", kKey, CpuModel{"AuthenticAMD", 25, 0x11});
  EXPECT_EQ(std::string(c.set_s), set);
  EXPECT_EQ(c.kernels.s.blocking.MC, 3 * mr);
  EXPECT_EQ(c.kernels.s.blocking.KC, 77);
  EXPECT_EQ(c.kernels.d.blocking.KC, 77);
  EXPECT_EQ(c.kernels.s.blocking.MR, mr);  // MR/NR stay the set's
  EXPECT_NE(c.source.find("wisdom /w.json"), std::string::npos) << c.source;
}

// The other classes' entries ("MR"/"NR" naming one of the set's tiles); an entry without them (a
// file written before the classes) keeps the set's own class tiles.
TEST(GemmConfig, WisdomSetsEachClass) {
  const std::string set = widest();
  const Kernels& own = *kernels_by_name(set);
  const Blocking last = own.s.tiles.back().blocking, last_d = own.d.tiles.back().blocking;
  auto tile = [](const Blocking& b, int64_t kc) {
    return "{\"MR\": " + std::to_string(b.MR) + ", \"NR\": " + std::to_string(b.NR) + ", \"MC\": " +
           std::to_string(2 * b.MR) + ", \"KC\": " + std::to_string(kc) + ", \"NC\": " + std::to_string(3 * b.NR) + "}";
  };
  auto with_classes = [&](const Blocking& b, const Blocking& l) {
    return "{\"MC\": " + std::to_string(3 * b.MR) + ", \"KC\": 77, \"NC\": " + std::to_string(5 * b.NR) +
           ", \"narrow\": " + tile(l, 55) + ", \"thin\": " + tile(l, 66) + ", \"long_k\": " + tile(l, 88) + "}";
  };
  GemmConfig c = make_gemm_config("", wisdom(set, with_classes(own.s.blocking, last), kKey, with_classes(own.d.blocking, last_d)),
                                  "/w.json", kKey, kNoMatch);
  EXPECT_EQ(c.kernels.s.blocking.KC, 77);
  EXPECT_EQ(c.kernels.s.narrow.blocking.KC, 55);
  EXPECT_EQ(c.kernels.s.thin.blocking.KC, 66);
  EXPECT_EQ(c.kernels.d.thin.blocking.KC, 66);
  EXPECT_EQ(c.kernels.s.long_k.blocking.KC, 88);
  EXPECT_EQ(c.kernels.s.narrow.blocking.MR, last.MR);
  EXPECT_EQ(c.kernels.s.narrow.blocking.NR, last.NR);
  EXPECT_EQ(c.kernels.s.narrow.blocking.MC, 2 * last.MR);
  EXPECT_EQ(c.kernels.s.thin.ukernel, own.s.tiles.back().ukernel);  // the kernel comes with the tile
  EXPECT_EQ(c.kernels.d.narrow.blocking.NR, last_d.NR);
  // Without the classes: the set's own.
  c = make_gemm_config("", wisdom(set, odd_blocking(set, false), kKey, odd_blocking(set, true)), "/w.json", kKey, kNoMatch);
  EXPECT_EQ(c.kernels.s.blocking.KC, 77);
  EXPECT_EQ(c.kernels.s.narrow.blocking.KC, own.s.narrow.blocking.KC);
  EXPECT_EQ(c.kernels.s.thin.blocking.MR, own.s.thin.blocking.MR);
  EXPECT_EQ(c.kernels.d.thin.blocking.NR, own.d.thin.blocking.NR);
  EXPECT_EQ(c.kernels.s.long_k.blocking.KC, own.s.long_k.blocking.KC);
  // MR/NR in the general entry name its tile too.
  const Blocking& t0 = own.s.tiles.front().blocking;
  c = make_gemm_config("", wisdom(set, tile(t0, 99), kKey, tile(own.d.tiles.front().blocking, 99)), "/w.json", kKey,
                       kNoMatch);
  EXPECT_EQ(c.kernels.s.blocking.MR, t0.MR);
  EXPECT_EQ(c.kernels.s.blocking.KC, 99);
}

TEST(GemmConfig, OtherCpusEntriesAreIgnored) {
  const GemmConfig c = make_gemm_config(
      "", wisdom("portable", "{\"MC\": 12, \"KC\": 77, \"NC\": 64}", "Other family 9 model 9: Other"), "/w.json", kKey,
      kNoMatch);
  EXPECT_EQ(std::string(c.set_s), widest());
  EXPECT_NE(c.kernels.s.blocking.KC, 77);
}

TEST(GemmConfig, ForcedSetTakesWisdomBlockingForItOrItsOwn) {
  // The wisdom measured the portable set: forcing it takes that blocking.
  const std::string w = wisdom("portable", "{\"MC\": 12, \"KC\": 77, \"NC\": 64}");
  GemmConfig c = make_gemm_config("portable", w, "/w.json", kKey, kNoMatch);
  EXPECT_STREQ(c.set_s, "portable");
  EXPECT_EQ(c.kernels.s.blocking.KC, 77);
  EXPECT_NE(c.source.find("HDDP_GEMM_KERNEL=portable"), std::string::npos) << c.source;
  if (!cpu_has_avx2_fma()) return;
  // Forcing a set the wisdom did not measure: that set's built-in blocking.
  c = make_gemm_config("avx2", w, "/w.json", kKey, kNoMatch);
  EXPECT_STREQ(c.set_s, "avx2");
  EXPECT_EQ(c.kernels.s.blocking.KC, kAvx2Float.KC);
  EXPECT_EQ(c.kernels.d.blocking.MC, kAvx2Double.MC);
}

TEST(GemmConfig, BadInputIsRefusedNamingTheFix) {
  expect_refused("{not json", "gemm_tune");
  expect_refused("{\"format\": \"other\", \"cpus\": {}}", "hddp-gemm-wisdom-1");
  expect_refused(wisdom("sse9", "{\"MC\": 12, \"KC\": 77, \"NC\": 64}"), "sse9");
  expect_refused(wisdom("portable", "{\"MC\": 13, \"KC\": 77, \"NC\": 64}"), "MC = 13");
  expect_refused(wisdom("portable", "{\"MC\": 12, \"KC\": 0, \"NC\": 64}"), "KC = 0");
  expect_refused(wisdom("portable", "{\"MC\": 12, \"KC\": 77}"), "\"NC\" missing");
  expect_refused(wisdom("portable", "{\"MC\": 12, \"KC\": 77, \"NC\": \"big\"}"), "\"NC\" missing or not an integer");
  // An entry whose kernel has no blocking of its own.
  expect_refused("{\"format\": \"hddp-gemm-wisdom-1\", \"cpus\": {\"" + kKey +
                     "\": {\"float\": {\"kernel\": \"portable\", \"blocking\": {}}, \"double\": {\"kernel\": \"portable\"}}}}",
                 "no entry for its own kernel portable");
  expect_refused("{\"format\": \"hddp-gemm-wisdom-1\", \"cpus\": {\"" + kKey + "\": {\"float\": {}}}}",
                 "\"float\" and \"double\"");
  // A tile the set does not have, and a class entry breaking the rules.
  expect_refused(wisdom("portable", "{\"MR\": 5, \"NR\": 16, \"MC\": 10, \"KC\": 77, \"NC\": 64}"),
                 "5x16 is not a micro-tile of the portable set (it has 6x16)");
  expect_refused(wisdom("portable", "{\"MC\": 12, \"KC\": 77, \"NC\": 64, \"narrow\": {\"MC\": 13, \"KC\": 7, \"NC\": 64}}"),
                 ".narrow: MC = 13");
  expect_refused(wisdom("portable", "{\"MC\": 12, \"KC\": 77, \"NC\": 64, \"thin\": {\"MR\": \"six\", \"MC\": 12, \"KC\": 7, \"NC\": 64}}"),
                 ".thin: \"MR\" is not an integer");
  expect_refused(wisdom("portable", "{\"MC\": 12, \"KC\": 77, \"NC\": 64, \"long_k\": [1]}"),
                 ".long_k: expected an object");
  EXPECT_THROW(make_gemm_config("sse9", "", "", kKey, kNoMatch), std::invalid_argument);
  if (!cpu_has_avx512()) {
    expect_refused(wisdom("avx512", "{\"MC\": 24, \"KC\": 77, \"NC\": 64}"), "cannot run here");
  }
}

TEST(GemmConfig, CpuKeyNamesVendorFamilyModel) {
  const std::string key = cpu_model_key();
  const CpuModel m = cpu_model();
  EXPECT_NE(key.find(" family " + std::to_string(m.family) + " model " + std::to_string(m.model) + ": "),
            std::string::npos) << key;
}
