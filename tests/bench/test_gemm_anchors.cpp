// The GEMM anchors of bench_gemm (bench/gemm_anchors.h): each computes correct results here on
// every transpose pair (the check bench_gemm runs before timing), the oracle catches a wrong
// entry, and each names the kernel it runs. BLIS must be there: scripts/setup-deps.sh installs it.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gemm_anchors.h"

using hddp::Trans;
using namespace hddp::bench;

namespace {

template <class T>
std::string run(GemmFn<T> fn, Trans ta, Trans tb, int64_t M, int64_t N, int64_t K, bool corrupt = false) {
  std::vector<T> A(M * K), B(K * N), C(M * N, T(7));
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> d(-1, 1);
  for (auto& x : A) x = T(d(rng));
  for (auto& x : B) x = T(d(rng));
  const int64_t lda = ta == Trans::No ? K : M, ldb = tb == Trans::No ? N : K;
  fn(ta, tb, M, N, K, T(1), A.data(), lda, B.data(), ldb, T(0), C.data(), N);
  if (corrupt) C[0] += T(0.01);
  return oracle_mismatch<T>(ta, tb, M, N, K, T(1), A.data(), lda, B.data(), ldb, C.data(), N);
}

}  // namespace

TEST(GemmAnchors, EachIsCorrectHereAndNamesItsKernel) {
  std::vector<std::string> absent;
  const std::vector<Anchor> anchors = gemm_anchors(absent);
  for (const auto& why : absent) ADD_FAILURE() << "anchor missing: " << why;
  bool openblas = false, blis = false;
  for (const Anchor& a : anchors) {
    openblas |= a.name == "openblas";
    blis |= a.name == "blis";
    EXPECT_FALSE(a.kernel.empty()) << a.name;
    for (Trans ta : {Trans::No, Trans::Yes})
      for (Trans tb : {Trans::No, Trans::Yes})
        for (auto [M, N, K] : {std::tuple{32, 20, 1}, std::tuple{37, 29, 61}, std::tuple{130, 67, 300}}) {
          EXPECT_EQ(run<float>(a.s, ta, tb, M, N, K), "") << a.name << " float " << M << "x" << N << "x" << K;
          EXPECT_EQ(run<double>(a.d, ta, tb, M, N, K), "") << a.name << " double " << M << "x" << N << "x" << K;
        }
  }
  EXPECT_TRUE(openblas);
  EXPECT_TRUE(blis);
}

TEST(GemmAnchors, OracleCatchesAWrongEntry) {
  EXPECT_EQ(run<float>(&hddp::gemm_naive<float>, Trans::No, Trans::No, 37, 29, 61), "");
  const std::string wrong = run<float>(&hddp::gemm_naive<float>, Trans::No, Trans::No, 37, 29, 61, true);
  EXPECT_NE(wrong.find("C[0][0]"), std::string::npos) << wrong;
  EXPECT_NE(run<double>(&hddp::gemm_naive<double>, Trans::Yes, Trans::Yes, 5, 3, 2, true), "");
}
