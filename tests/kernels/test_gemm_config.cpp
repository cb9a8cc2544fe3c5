// The per-CPU choice of GEMM kernel set and blocking (kernels/gemm_config.h): the built-in
// table's rows, the order HDDP_GEMM_KERNEL > wisdom > table > widest, wisdom entries of other
// CPUs ignored, and malformed wisdom refused with a message naming the file and what to do.
#include <gtest/gtest.h>

#include <string>
#include <tuple>

#include <hddp/kernels/gemm_blocking.h>
#include <hddp/kernels/gemm_config.h>

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

TEST(GemmConfig, BuiltInRowsMatchTheirSets) {
  auto blocking_of = [](const std::string& set, bool is_double) {
    if (set == "avx512") return is_double ? kAvx512Double : kAvx512Float;
    if (set == "avx2") return is_double ? kAvx2Double : kAvx2Float;
    return is_double ? kPortableDouble : kPortableFloat;
  };
  for (const CpuChoice& row : kCpuChoices) {
    for (auto [set, b, is_double] : {std::tuple{row.set_s, row.s, false}, std::tuple{row.set_d, row.d, true}}) {
      const Blocking own = blocking_of(set, is_double);
      EXPECT_EQ(b.MR, own.MR) << row.why;
      EXPECT_EQ(b.NR, own.NR) << row.why;
      EXPECT_EQ(b.MC % b.MR, 0) << row.why;
      EXPECT_EQ(b.NC % b.NR, 0) << row.why;
      EXPECT_GT(b.KC, 0) << row.why;
    }
    EXPECT_LE(row.model_lo, row.model_hi) << row.why;
  }
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
