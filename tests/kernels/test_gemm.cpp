// GEMM against a long-double oracle: every backend, both precisions, all transpose pairs,
// edge sizes around the blocking parameters, padded leading dimensions, alpha/beta special
// values (C poisoned with NaN/Inf when beta == 0), and bitwise equality across thread counts.
// The blocked backend runs the micro-kernel named by HDDP_GEMM_KERNEL (ctest runs the suite
// once per kernel); one this CPU cannot execute makes the program exit 77 (ctest: Not Run).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "gemm_oracle.h"
#include "bench/cnn_gemm_shapes.h"
#include <hddp/kernels/gemm.h>
#include <hddp/kernels/gemm/gemm_config.h>
#include <hddp/kernels/gemm/gemm_backends.h>
#include <hddp/kernels/gemm/gemm_ukernel.h>

using namespace hddp;
using hddp::test::GemmCase;
using hddp::test::GemmFn;

namespace {

constexpr Trans kTrans[] = {Trans::No, Trans::Yes};

template <class T>
struct Backends {
  static std::vector<std::pair<const char*, GemmFn<T>>> all() {
    return {{"blocked", &gemm_blocked<T>}, {"openblas", &gemm_openblas<T>}, {"naive", &gemm_naive<T>}};
  }
};

// Sizes that hit every edge of the running kernel's tiles (every shape class's: MR+-1, NR+-1,
// KC+-1, KC*5/4 +- 1 (one K block or two), MC+1) and small sizes and primes, all above `floor`.
template <class T>
std::vector<int64_t> edge_sizes(int64_t floor = 0) {
  const detail::KernelSet<T>& ks = detail::kernel_set<T>(detail::cpu_kernels());
  std::vector<int64_t> v{0, 1, 2, 3, 7, 13, 31, 61, 127, 251, 293};
  for (detail::ShapeClass c : detail::kShapeClasses) {
    const detail::Blocking B = ks.tile(c).blocking;
    // MR, NR and MC edges at the first multiple above the floor too (the general class needs
    // every dimension above kNarrowMax).
    for (int64_t unit : {B.MR, B.NR}) {
      const int64_t first = std::max<int64_t>(1, (floor + unit) / unit) * unit;
      for (int64_t e : {unit - 1, unit, unit + 1, first - 1, first, first + 1}) v.push_back(e);
    }
    for (int64_t e : {B.KC - 1, B.KC + 1, B.KC + B.KC / 4, B.KC + B.KC / 4 + 1, B.MC + 1}) v.push_back(e);
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::erase_if(v, [&](int64_t x) { return x <= floor && floor > 0; });
  return v;
}

std::string describe(const GemmCase& c) {
  return std::string(c.ta == Trans::No ? "N" : "T") + (c.tb == Trans::No ? "N" : "T") + " M=" +
         std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta) +
         " pad=" + std::to_string(c.pad);
}

template <class T>
void check_all_backends(const GemmCase& c, uint64_t seed) {
  for (auto [name, fn] : Backends<T>::all()) {
    ::testing::AssertionResult r = ::testing::AssertionSuccess();
    hddp::test::run_and_check<T>(fn, c, seed, &r);
    EXPECT_TRUE(r) << name << " " << (sizeof(T) == 4 ? "float " : "double ") << describe(c);
  }
}

template <class T>
class GemmTyped : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GemmTyped, Types);

// One dimension at a time swept over the edge sizes, the other two fixed at awkward values,
// once per shape class (kernels/gemm/gemm_blocking.h): long_k (M and N <= 128), narrow (N <= 128),
// thin (M or K <= 128), general (all above 128); sizes that would leave the class are left out.
// Leading dimensions tight or padded (seed % 3), so B and A are read in place or packed
// (gemm_blocked.cpp).
TYPED_TEST(GemmTyped, EdgeSizesEachDimension) {
  using T = TypeParam;
  using detail::ShapeClass;
  uint64_t seed = 1;
  const int64_t big = detail::kNarrowMax;
  const struct {
    ShapeClass cls;
    int64_t M, N, K;
  } bases[] = {{ShapeClass::LongK, 37, 23, 19},
               {ShapeClass::Narrow, 150, 23, 19},
               {ShapeClass::Thin, 37, 150, 19},
               {ShapeClass::General, 140, 150, 135}};
  for (const auto& base : bases)
    for (int dim = 0; dim < 3; ++dim)
      for (int64_t s : edge_sizes<T>(base.cls == ShapeClass::General ? big : 0))
        for (Trans ta : kTrans)
          for (Trans tb : kTrans) {
            GemmCase c{ta, tb, base.M, base.N, base.K, 1.0, 0.0, int64_t(seed % 3)};
            (dim == 0 ? c.M : dim == 1 ? c.N : c.K) = s;
            if (c.M > 0 && c.N > 0 && c.K > 0 && detail::shape_class(c.M, c.N, c.K) != base.cls) continue;
            // The general class on the blocked backend alone: the others gain nothing from it.
            if (base.cls == ShapeClass::General) {
              ::testing::AssertionResult r = ::testing::AssertionSuccess();
              hddp::test::run_and_check<T>(&gemm_blocked<T>, c, seed++, &r);
              EXPECT_TRUE(r) << "blocked " << describe(c);
            } else {
              check_all_backends<T>(c, seed++);
            }
          }
}

// A Fashion-MNIST CNN's products through im2col, batch 64 (bench_gemm's conv* and fc1_* rows):
// the forward passes Y = cols W^T (NT), the weight gradients dW += dY^T cols (TN, beta 1 as
// gradient accumulation does; alpha 1 and beta 0 too) and the input gradients dcols = dY W (NN).
// The CNN's products (bench/cnn_gemm_shapes.h).
using NamedCase = hddp::bench::CnnProduct;
constexpr auto& kCnnCases = hddp::bench::kCnnProducts;

TYPED_TEST(GemmTyped, ConvolutionShapes) {
  using T = TypeParam;
  uint64_t seed = 1200;
  // Each product once, alpha 1 beta 0 and alpha -0.5 beta 1 in turn (the weight gradients
  // accumulate: beta 1); AlphaBeta covers every pair on smaller shapes.
  for (size_t i = 0; i < std::size(kCnnCases); ++i) {
    const NamedCase& n = kCnnCases[i];
    const GemmCase c{n.ta, n.tb, n.M, n.N, n.K, i % 2 ? -0.5 : 1.0, i % 2 ? 1.0 : 0.0, 0};
    ::testing::AssertionResult r = ::testing::AssertionSuccess();
    hddp::test::run_and_check<T>(&gemm_blocked<T>, c, seed++, &r);
    EXPECT_TRUE(r) << n.name << " " << describe(c);
  }
}

// Around those: the layers' three layouts with odd channel counts N (or M) = 31, 33, 63, 65 and
// K = 1, 9, 27, 288 (Cin*k*k), and the long-K weight gradients of a first convolution with a
// few more or fewer channels (the direct path where C is small, gemm_small.h).
TYPED_TEST(GemmTyped, ConvolutionNeighbours) {
  using T = TypeParam;
  uint64_t seed = 1300;
  auto check = [&](const GemmCase& c) {
    ::testing::AssertionResult r = ::testing::AssertionSuccess();
    hddp::test::run_and_check<T>(&gemm_blocked<T>, c, seed++, &r);
    EXPECT_TRUE(r) << describe(c);
  };
  for (int64_t ch : {31, 33, 63, 65})
    for (int64_t k : {1, 9, 27, 288}) {
      check({Trans::No, Trans::Yes, 1001, ch, k, 1.0, 0.0, int64_t(seed % 2)});  // forward
      check({Trans::Yes, Trans::No, ch, k, 1001, 1.0, 1.0, int64_t(seed % 2)});   // weight gradient
      check({Trans::No, Trans::No, 1001, k, ch, 1.0, 0.0, int64_t(seed % 2)});    // input gradient
    }
  for (int64_t m : {31, 32, 33})
    for (int64_t n : {1, 8, 9, 16, 17})
      for (Trans ta : kTrans)
        for (Trans tb : kTrans) check({ta, tb, m, n, 6007, 0.5, 0.3, int64_t(seed % 2)});
}

// alpha in {0, 1, -0.5} x beta in {0, 1, 0.3} on shapes that take the direct path, the
// blocked path and the threaded path.
TYPED_TEST(GemmTyped, AlphaBeta) {
  using T = TypeParam;
  const int64_t shapes[][3] = {{32, 20, 1}, {32, 1, 20}, {32, 20, 20}, {145, 67, 300}, {7, 300, 257}};
  uint64_t seed = 100;
  for (auto& s : shapes)
    for (double alpha : {0.0, 1.0, -0.5})
      for (double beta : {0.0, 1.0, 0.3})
        for (Trans ta : kTrans)
          for (Trans tb : kTrans)
            check_all_backends<T>({ta, tb, s[0], s[1], s[2], alpha, beta, 2}, seed++);
}

// Primes and mixed sizes in all three dimensions at once.
TYPED_TEST(GemmTyped, MixedPrimeShapes) {
  using T = TypeParam;
  const int64_t shapes[][3] = {{61, 127, 31}, {251, 13, 293}, {293, 251, 127}, {1, 293, 251},
                               {293, 1, 61}, {127, 61, 1}, {3, 2, 1000}};
  uint64_t seed = 500;
  for (auto& s : shapes)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) check_all_backends<T>({ta, tb, s[0], s[1], s[2], 1.0, 0.3, 1}, seed++);
}

// The direct path for tiny products: every width from 1 to 70 in both orientations (each
// way gemm_small covers the columns: two-register chunks, one register plus a narrower one,
// a partly used register), K short and long, leading dimensions tight (pad 0: a read past a
// row's end leaves the operand; ASan builds catch it) and padded.
TYPED_TEST(GemmTyped, DirectPathAllWidths) {
  using T = TypeParam;
  uint64_t seed = 700;
  for (int64_t w = 1; w <= 70; ++w)
    for (int64_t K : {2, 5, 20})
      for (Trans ta : kTrans)
        for (Trans tb : kTrans) {
          check_all_backends<T>({ta, tb, 7, w, K, 1.0, 0.0, 0}, seed++);           // columns along N
          check_all_backends<T>({ta, tb, w, 3, K, 0.5, 1.0, int64_t(w % 2)}, seed++);  // along M (C^T)
        }
  // Up to the path's limit, 64^3: in place, and through the copy.
  for (auto [M, N, K] : {std::tuple{64, 64, 64}, std::tuple{33, 64, 121}, std::tuple{64, 50, 64}, std::tuple{256, 16, 64}})
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) check_all_backends<T>({ta, tb, M, N, K, 1.0, 0.0, 0}, seed++);
}

// One large product per transpose pair (crosses MC, KC and, for double, several NR panels).
TYPED_TEST(GemmTyped, Size1000) {
  using T = TypeParam;
  uint64_t seed = 900;
  for (Trans ta : kTrans)
    for (Trans tb : kTrans) {
      GemmCase c{ta, tb, 1000, 300, 1000, -0.5, 0.0, 3};
      ::testing::AssertionResult r = ::testing::AssertionSuccess();
      hddp::test::run_and_check<T>(&gemm_blocked<T>, c, seed++, &r);
      EXPECT_TRUE(r) << describe(c);
    }
}

// 1 and 2 threads give bitwise identical C (the parallel path is taken: work is above the
// threshold), and so does a thread count that does not divide the tile grid evenly. Shapes of
// every class (general; narrow; thin, B read in place or packed by its leading dimension).
TYPED_TEST(GemmTyped, BitwiseIdenticalAcrossThreadCounts) {
  using T = TypeParam;
  const int saved = omp_get_max_threads();
  const int64_t shapes[][3] = {{300, 257, 301}, {1000, 67, 129}, {61, 1000, 200}, {64, 300, 700}, {700, 290, 64}};
  uint64_t seed = 1000;
  for (auto& s : shapes)
    for (Trans ta : kTrans)
      for (Trans tb : kTrans) {
        GemmCase c{ta, tb, s[0], s[1], s[2], 1.0, 0.3, 1};
        std::vector<std::vector<T>> results;
        for (int nt : {1, 2, 3}) {
          omp_set_num_threads(nt);
          ::testing::AssertionResult r = ::testing::AssertionSuccess();
          results.push_back(hddp::test::run_and_check<T>(&gemm_blocked<T>, c, seed, &r));
          EXPECT_TRUE(r) << nt << " threads " << describe(c);
        }
        for (size_t i = 1; i < results.size(); ++i)
          EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(), results[0].size() * sizeof(T)))
              << "results differ between 1 and " << i + 1 << " threads: " << describe(c);
        ++seed;
      }
  omp_set_num_threads(saved);
}

// The CNN's products themselves on 1, 2 and 3 threads: bitwise identical (the oracle checks them
// in ConvolutionShapes).
TYPED_TEST(GemmTyped, ConvolutionShapesBitwiseAcrossThreadCounts) {
  using T = TypeParam;
  const int saved = omp_get_max_threads();
  uint64_t seed = 1400;
  for (const NamedCase& n : kCnnCases) {
    const GemmCase c{n.ta, n.tb, n.M, n.N, n.K, 1.0, 0.5, 0};
    const hddp::test::GemmData<T> d(c, seed++);
    std::vector<std::vector<T>> results;
    for (int nt : {1, 2, 3}) {
      omp_set_num_threads(nt);
      results.push_back(d.C0);
      gemm_blocked<T>(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), d.A.data(), d.lda, d.B.data(), d.ldb, T(c.beta),
                      results.back().data(), d.ldc);
    }
    for (size_t i = 1; i < results.size(); ++i)
      EXPECT_EQ(0, std::memcmp(results[0].data(), results[i].data(), results[0].size() * sizeof(T)))
          << n.name << ": results differ between 1 and " << i + 1 << " threads";
  }
  omp_set_num_threads(saved);
}

// Called from inside a parallel region (nested parallelism off: the GEMM's own team has one
// thread), each thread its own product: every one correct and bitwise the product called alone.
TYPED_TEST(GemmTyped, InsideAParallelRegion) {
  using T = TypeParam;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  const GemmCase c{Trans::No, Trans::Yes, 300, 200, 150, 1.0, 0.0, 1};
  const hddp::test::GemmData<T> d0(c, 1500), d1(c, 1501);
  std::vector<T> alone[2] = {d0.C0, d1.C0}, inside[2] = {d0.C0, d1.C0};
  const hddp::test::GemmData<T>* d[2] = {&d0, &d1};
  for (int i = 0; i < 2; ++i)
    gemm_blocked<T>(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), d[i]->A.data(), d[i]->lda, d[i]->B.data(), d[i]->ldb,
                    T(c.beta), alone[i].data(), d[i]->ldc);
#pragma omp parallel num_threads(2)
  {
    const int i = omp_get_thread_num();
    gemm_blocked<T>(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), d[i]->A.data(), d[i]->lda, d[i]->B.data(), d[i]->ldb,
                    T(c.beta), inside[i].data(), d[i]->ldc);
  }
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(0, std::memcmp(alone[i].data(), inside[i].data(), alone[i].size() * sizeof(T))) << "thread " << i;
  omp_set_num_threads(saved);
}

// The public entry point follows the selected backend.
TEST(GemmBackend, SelectAndParse) {
  EXPECT_EQ(parse_gemm_backend("blocked"), GemmBackend::Blocked);
  EXPECT_EQ(parse_gemm_backend("openblas"), GemmBackend::OpenBLAS);
  EXPECT_EQ(parse_gemm_backend("naive"), GemmBackend::Naive);
  EXPECT_THROW(parse_gemm_backend("fast"), std::invalid_argument);
  EXPECT_THROW(parse_gemm_backend(""), std::invalid_argument);
  for (GemmBackend b : {GemmBackend::Naive, GemmBackend::OpenBLAS, GemmBackend::Blocked}) {
    set_gemm_backend(b);
    EXPECT_EQ(gemm_backend(), b);
    EXPECT_EQ(parse_gemm_backend(to_string(b)), b);
    const float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1};
    float C[4] = {NAN, NAN, NAN, NAN};
    gemm(Trans::No, Trans::No, 2, 2, 3, 1.0f, A, 3, B, 2, 0.0f, C, 2);  // [[4,5],[10,11]]
    EXPECT_EQ(C[0], 4.0f);
    EXPECT_EQ(C[1], 5.0f);
    EXPECT_EQ(C[2], 10.0f);
    EXPECT_EQ(C[3], 11.0f);
  }
}

// Invalid arguments throw std::invalid_argument naming the argument, on every backend.
TEST(GemmArgs, InvalidArgumentsThrow) {
  std::vector<float> a(100, 1.f), b(100, 1.f), c(100, 0.f);
  for (auto [name, fn] : Backends<float>::all()) {
    auto expect_throw = [&](const char* what, auto call) {
      try {
        call();
        ADD_FAILURE() << name << ": no exception for bad " << what;
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    };
    expect_throw("M", [&] { fn(Trans::No, Trans::No, -1, 2, 2, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2); });
    expect_throw("N", [&] { fn(Trans::No, Trans::No, 2, -1, 2, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2); });
    expect_throw("K", [&] { fn(Trans::No, Trans::No, 2, 2, -3, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2); });
    expect_throw("lda", [&] { fn(Trans::No, Trans::No, 4, 2, 3, 1.f, a.data(), 2, b.data(), 2, 0.f, c.data(), 2); });
    expect_throw("lda", [&] { fn(Trans::Yes, Trans::No, 4, 2, 3, 1.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 2); });
    expect_throw("ldb", [&] { fn(Trans::No, Trans::No, 2, 5, 3, 1.f, a.data(), 3, b.data(), 4, 0.f, c.data(), 5); });
    expect_throw("ldb", [&] { fn(Trans::No, Trans::Yes, 2, 5, 3, 1.f, a.data(), 3, b.data(), 2, 0.f, c.data(), 5); });
    expect_throw("ldc", [&] { fn(Trans::No, Trans::No, 2, 5, 3, 1.f, a.data(), 3, b.data(), 5, 0.f, c.data(), 4); });
    expect_throw("A is null", [&] { fn(Trans::No, Trans::No, 2, 2, 2, 1.f, nullptr, 2, b.data(), 2, 0.f, c.data(), 2); });
    expect_throw("C is null", [&] { fn(Trans::No, Trans::No, 2, 2, 2, 1.f, a.data(), 2, b.data(), 2, 0.f, nullptr, 2); });
    // M == 0 or N == 0 is a valid no-op, even with null pointers.
    EXPECT_NO_THROW(fn(Trans::No, Trans::No, 0, 2, 2, 1.f, nullptr, 2, nullptr, 2, 0.f, nullptr, 2));
  }
}

}  // namespace

// The kernel under test is the one asked for: a silent fallback would test another kernel.
TEST(GemmKernel, RunsTheRequestedKernel) {
  const char* want = std::getenv("HDDP_GEMM_KERNEL");
  if (want && *want) {
    EXPECT_STREQ(gemm_kernel_name(), want);
  }
  if (std::getenv("HDDP_TEST_ODD_WISDOM")) {  // the odd entry is what runs
    const std::string d = gemm_config_description();
    EXPECT_NE(d.find("from wisdom "), std::string::npos) << d;
    for (detail::ShapeClass c : detail::kShapeClasses) {
      EXPECT_EQ(detail::cpu_kernels().s.tile(c).blocking.KC, 37) << d;
      EXPECT_EQ(detail::cpu_kernels().d.tile(c).blocking.KC, 37) << d;
    }
  }
  const detail::Kernels& k = detail::cpu_kernels();
  for (detail::ShapeClass c : detail::kShapeClasses)
    for (const detail::Blocking& b : {k.s.tile(c).blocking, k.d.tile(c).blocking}) {
      EXPECT_LE(b.MR, detail::kMaxMR);
      EXPECT_LE(b.NR, detail::kMaxNR);
      EXPECT_EQ(b.MC % b.MR, 0);
      EXPECT_EQ(b.NC % b.NR, 0);
    }
}

// HDDP_TEST_ODD_WISDOM=<path>: write a wisdom file there with an entry for this CPU (the
// widest set, MC = 3 MR, KC = 37, NC = 5 NR for every shape class, the classes other than the
// general one on the set's last tile: every loop has a remainder) and read it.
void write_odd_wisdom(const char* path) {
  const char* set = detail::cpu_has_avx512() ? "avx512" : detail::cpu_has_avx2_fma() ? "avx2" : "portable";
  const detail::Kernels& k = *detail::kernels_by_name(set);
  auto odd = [](const detail::Blocking& b) {
    return "{\"MR\": " + std::to_string(b.MR) + ", \"NR\": " + std::to_string(b.NR) + ", \"MC\": " +
           std::to_string(3 * b.MR) + ", \"KC\": 37, \"NC\": " + std::to_string(5 * b.NR) + "}";
  };
  auto half = [&](const auto& ks) {
    std::string general = odd(ks.blocking), last = odd(ks.tiles.back().blocking);
    general.pop_back();
    return std::string("{\"kernel\": \"") + set + "\", \"blocking\": {\"" + set + "\": " + general +
           ", \"narrow\": " + last + ", \"thin\": " + last + ", \"long_k\": " + last + "}}}";
  };
  std::FILE* f = std::fopen(path, "w");
  if (!f) {
    std::fprintf(stderr, "cannot write %s\n", path);
    std::exit(1);
  }
  std::fprintf(f, "{\"format\": \"hddp-gemm-wisdom-1\", \"cpus\": {\"%s\": {\"float\": %s, \"double\": %s}}}\n",
               detail::cpu_model_key().c_str(), half(k.s).c_str(), half(k.d).c_str());
  std::fclose(f);
  setenv("HDDP_GEMM_WISDOM", path, 1);
}

int main(int argc, char** argv) {
  if (const char* odd = std::getenv("HDDP_TEST_ODD_WISDOM")) write_odd_wisdom(odd);
  const char* want = std::getenv("HDDP_GEMM_KERNEL");
  if (want && *want) {
    const std::string why = detail::kernel_unsupported_reason(want);  // throws if unknown
    if (!why.empty()) {
      std::printf("GEMM kernel %s: NOT RUN, %s\n", want, why.c_str());
      return 77;
    }
  }
  const detail::Kernels& k = detail::cpu_kernels();
  std::printf("GEMM under test: %s; classes: float %s; double %s\n", gemm_config_description().c_str(),
              detail::describe_classes(k.s.blockings()).c_str(), detail::describe_classes(k.d.blockings()).c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
