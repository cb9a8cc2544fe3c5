// bf16 (kernels/bf16.h) and gemm_bf16 (kernels/gemm_bf16.h).
// - The conversions: rounding to nearest even, ties, NaN to 0xFFFF, denormals rounded (PyTorch's
//   rule; tests/kernels/bf16_vs_torch.py checks against PyTorch itself), every element-wise set the CPU runs giving the scalar's bits over a sweep of patterns.
// - gemm_bf16 on the set named by HDDP_TEST_BF16_SET (amx, avx512bf16, portable, or amx-model:
//   the AMX loops on a C++ model of the tile unit, which checks their packing and tile addressing
//   on any CPU): against the naive twin over 0, 1 and odd sizes, every transpose, alpha and beta;
//   against the float gemm of the rounded inputs; float inputs rounded on packing bit for bit as
//   converted ones; bitwise the same for 1, 2 and 3 threads. A set this CPU cannot run exits 77
//   ("Not Run"), never passes.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <hddp/kernels/bf16.h>
#include <hddp/kernels/cpu_isa.h>
#include <hddp/kernels/elementwise/elementwise_ukernel.h>
#include <hddp/kernels/gemm_bf16.h>
#include <hddp/kernels/gemm_bf16/gemm_bf16_ukernel.h>

using namespace hddp;

namespace {

std::string g_set;  // the set under test

float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

TEST(Bf16, RoundsToNearestEvenAndNaNIsFFFF) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(from_bits(0x3f808000)).bits, 0x3f80);  // tie, even stays
  EXPECT_EQ(to_bf16(from_bits(0x3f818000)).bits, 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(to_bf16(from_bits(0x3f808001)).bits, 0x3f81);  // above the tie
  EXPECT_EQ(to_bf16(from_bits(0x3f807fff)).bits, 0x3f80);  // below the tie
  EXPECT_EQ(to_bf16(-2.5f).bits, 0xc020);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()).bits, 0x7f80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds to infinity, as PyTorch
  EXPECT_EQ(to_bf16(from_bits(0x7f800001)).bits, 0xffff);              // every NaN: 0xFFFF, as PyTorch
  EXPECT_EQ(to_bf16(from_bits(0x7fffffff)).bits, 0xffff);              // (rounding would carry it into infinity)
  EXPECT_EQ(to_bf16(from_bits(0xff800001)).bits, 0xffff);
  EXPECT_EQ(to_bf16(from_bits(0x00018000)).bits, 0x0002);              // a denormal rounds, not flushed
  EXPECT_EQ(to_bf16(from_bits(0x80000001)).bits, 0x8000);
  EXPECT_EQ(to_float(bf16{0x4049}), 3.140625f);
  EXPECT_EQ(round_bf16(3.14159265f), 3.140625f);
}

// Every set the CPU runs gives the scalar conversion's bits: all 65536 high halves, each with
// low halves at and around the tie, plus random patterns.
TEST(Bf16, EverySetMatchesTheScalarRule) {
  std::vector<float> x;
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) x.push_back(from_bits(hi << 16 | lo));
  std::mt19937 rng(5);
  for (int i = 0; i < 100000; ++i) x.push_back(from_bits(rng()));
  const int64_t n = int64_t(x.size());
  for (const char* name : {"portable", "avx2", "avx512"}) {
    const detail::EltKernels* k = detail::elementwise_by_name(name);
    if (!k) continue;  // this CPU cannot run it; the others still check
    std::vector<uint16_t> h(x.size());
    std::vector<float> back(x.size()), rounded(x.size());
    k->bf16.to_bf16(n, x.data(), h.data());
    k->bf16.to_float(n, h.data(), back.data());
    k->bf16.round(n, x.data(), rounded.data());
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = to_bf16(x[i]).bits;
      ASSERT_EQ(h[i], want) << name << " at pattern " << std::hex << std::bit_cast<uint32_t>(x[i]);
      uint32_t b, r;
      std::memcpy(&b, &back[i], 4);
      std::memcpy(&r, &rounded[i], 4);
      ASSERT_EQ(b, uint32_t(want) << 16) << name;
      ASSERT_EQ(r, uint32_t(want) << 16) << name;
    }
  }
  // The public calls (the set in use, threads above kParallelMin).
  std::vector<bf16> h(x.size());
  std::vector<float> back(x.size());
  to_bf16(n, x.data(), h.data());
  to_float(n, h.data(), back.data());
  for (size_t i = 0; i < x.size(); i += 97) {
    ASSERT_EQ(h[i].bits, to_bf16(x[i]).bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(back[i]), uint32_t(h[i].bits) << 16);
  }
}

std::vector<float> randv(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(size_t(std::max<int64_t>(n, 1)));
  for (auto& x : v) x = float(double(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  return v;
}

template <class S>
void run_set(Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, float alpha, const S* A, int64_t lda, const S* B,
             int64_t ldb, float beta, float* C, int64_t ldc) {
  if (g_set == "amx-model")
    detail::gemm_bf16_with(detail::amx_model_kernels(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else if constexpr (std::is_same_v<S, float>)
    gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    gemm_bf16(ta, tb, M, N, K, alpha, reinterpret_cast<const bf16*>(A), lda, reinterpret_cast<const bf16*>(B), ldb,
              beta, C, ldc);
}

struct Case {
  Trans ta, tb;
  int64_t M, N, K;
  float alpha, beta;
};

// One product on the set under test and on the naive twin; leading dimensions padded by 3.
void check(const Case& c, uint64_t seed) {
  const int64_t ar = c.ta == Trans::No ? c.M : c.K, ac = c.ta == Trans::No ? c.K : c.M;
  const int64_t br = c.tb == Trans::No ? c.K : c.N, bc = c.tb == Trans::No ? c.N : c.K;
  const int64_t lda = ac + 3, ldb = bc + 3, ldc = c.N + 3;
  const std::vector<float> A = randv(ar * lda, seed), B = randv(br * ldb, seed + 1);
  std::vector<float> C = randv(c.M * ldc, seed + 2);
  if (c.beta == 0.0f && c.M * c.N > 0) C[0] = std::numeric_limits<float>::quiet_NaN();  // beta 0 overwrites
  std::vector<float> want = C, got = C, got_h = C;
  detail::gemm_bf16_naive(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, want.data(), ldc);
  run_set(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, got.data(), ldc);
  // The same inputs converted first: the rounding on packing is the conversion's, bit for bit.
  std::vector<bf16> Ah(A.size()), Bh(B.size());
  to_bf16(int64_t(A.size()), A.data(), Ah.data());
  to_bf16(int64_t(B.size()), B.data(), Bh.data());
  run_set(c.ta, c.tb, c.M, c.N, c.K, c.alpha, reinterpret_cast<const uint16_t*>(Ah.data()), lda,
          reinterpret_cast<const uint16_t*>(Bh.data()), ldb, c.beta, got_h.data(), ldc);
  const std::string where = "M " + std::to_string(c.M) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K) +
                            " ta " + std::to_string(int(c.ta == Trans::Yes)) + " tb " +
                            std::to_string(int(c.tb == Trans::Yes)) + " alpha " + std::to_string(c.alpha) + " beta " +
                            std::to_string(c.beta);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = size_t(i * ldc + j);
      if (j >= c.N) {  // the padding of C is never touched
        ASSERT_EQ(std::bit_cast<uint32_t>(got[at]), std::bit_cast<uint32_t>(C[at])) << where;
        continue;
      }
      // Products of values below 1 are exact; sums in another order differ by a few roundings.
      const double tol = 1e-6 * double(c.K + 2) * std::fabs(c.alpha) + 1e-6;
      ASSERT_NEAR(got[at], want[at], tol) << where << " at (" << i << ", " << j << ")";
      ASSERT_EQ(std::bit_cast<uint32_t>(got_h[at]), std::bit_cast<uint32_t>(got[at])) << where;
    }
}

TEST(GemmBf16, SweepAgainstTheNaiveTwin) {
  const float ab[][2] = {{1.0f, 0.0f}, {-0.5f, 1.0f}, {2.0f, 0.5f}};
  uint64_t seed = 1;
  int rot = 0;
  for (int64_t M : {0, 1, 13, 14, 15, 33, 70})
    for (int64_t N : {0, 1, 17, 32, 33, 65})
      for (int64_t K : {0, 1, 2, 3, 31, 33, 100})
        for (Trans ta : {Trans::No, Trans::Yes})
          for (Trans tb : {Trans::No, Trans::Yes}) {
            const auto& s = ab[rot++ % 3];
            check({ta, tb, M, N, K, s[0], s[1]}, seed += 3);
          }
}

// Past one K block and one N block of every set (KC 512, the AMX set's NC 1024), and M past MC.
TEST(GemmBf16, PastTheCacheBlocks) {
  check({Trans::No, Trans::Yes, 300, 1100, 530, 1.0f, 0.5f}, 11);
  check({Trans::Yes, Trans::No, 45, 70, 1100, 1.0f, 0.0f}, 12);
}

// The float gemm of the rounded inputs: the same up to the order of the sums.
TEST(GemmBf16, MatchesTheFloatGemmOfRoundedInputs) {
  const int64_t M = 64, N = 96, K = 288;
  std::vector<float> A = randv(M * K, 21), B = randv(K * N, 22), C(size_t(M * N)), want(size_t(M * N));
  run_set(Trans::No, Trans::No, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N);
  round_bf16(M * K, A.data(), A.data());
  round_bf16(K * N, B.data(), B.data());
  gemm(Trans::No, Trans::No, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, want.data(), N);
  for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(C[size_t(i)], want[size_t(i)], 1e-6 * K) << i;
}

TEST(GemmBf16, BitwiseAcrossThreadCounts) {
  const int64_t M = 150, N = 200, K = 300;
  const std::vector<float> A = randv(M * K, 31), B = randv(N * K, 32);
  std::vector<float> first;
  const int saved = omp_get_max_threads();
  for (int nt : {1, 2, 3}) {
    omp_set_num_threads(nt);
    std::vector<float> C = randv(M * N, 33);
    run_set(Trans::No, Trans::Yes, M, N, K, 1.0f, A.data(), K, B.data(), K, 1.0f, C.data(), N);
    if (first.empty()) first = C;
    for (int64_t i = 0; i < M * N; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(C[size_t(i)]), std::bit_cast<uint32_t>(first[size_t(i)])) << nt << " threads";
  }
  omp_set_num_threads(saved);
}

TEST(GemmBf16, RefusesBadArguments) {
  std::vector<float> a(16), c(16);
  EXPECT_THROW(gemm_bf16(Trans::No, Trans::No, -1, 2, 2, 1.0f, a.data(), 2, a.data(), 2, 0.0f, c.data(), 2),
               std::invalid_argument);
  EXPECT_THROW(gemm_bf16(Trans::No, Trans::No, 2, 2, 4, 1.0f, a.data(), 2, a.data(), 2, 0.0f, c.data(), 2),
               std::invalid_argument);  // lda below K
  EXPECT_THROW(gemm_bf16(Trans::No, Trans::No, 2, 2, 2, 1.0f, nullptr, 2, a.data(), 2, 0.0f, c.data(), 2),
               std::invalid_argument);
  EXPECT_THROW(gemm_bf16_unsupported_reason("fp8"), std::invalid_argument);
  EXPECT_EQ(gemm_bf16_unsupported_reason("portable"), "");
}

}  // namespace

int main(int argc, char** argv) {
  const char* want = std::getenv("HDDP_TEST_BF16_SET");
  g_set = want && *want ? want : gemm_bf16_kernel_name();
  if (g_set != "amx-model") {
    const std::string why = gemm_bf16_unsupported_reason(g_set);  // throws if unknown
    if (!why.empty()) {
      std::printf("bf16 kernel set %s: NOT RUN, %s\n", g_set.c_str(), why.c_str());
      return 77;
    }
    setenv("HDDP_GEMM_BF16_KERNEL", g_set.c_str(), 1);
    if (gemm_bf16_kernel_name() != g_set) {
      std::printf("asked for %s, gemm_bf16 runs %s\n", g_set.c_str(), gemm_bf16_kernel_name());
      return 1;
    }
  }
  std::printf("bf16 kernel set under test: %s\n", g_set.c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
