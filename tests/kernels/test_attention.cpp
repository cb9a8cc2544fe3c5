// The fused causal attention (kernels/attention.h) against its naive twin at odd T, odd head
// sizes, T = 1 and T = block +- 1; its gradients against finite differences in double; the same
// bits for any thread count. Run once per kernel set (HDDP_ATTENTION_KERNEL).
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <hddp/kernels/attention.h>
#include <hddp/kernels/cpu_isa.h>

namespace {

using hddp::AttentionShape;

template <class T>
std::vector<T> randn(int64_t n, uint32_t seed, double sd = 1.0) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0.0, sd);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& x : v) x = T(d(g));
  return v;
}

// Largest |a - b| / (1 + |b|).
template <class T>
double max_rel(const std::vector<T>& a, const std::vector<T>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(double(a[i]) - double(b[i])) / (1 + std::abs(double(b[i]))));
  return m;
}

struct Case {
  int64_t B, T, C, H;
};
// Odd T, odd head sizes (C / H = 5, 7, 3), T = 1, T = 64 +- 1, several blocks.
const Case kCases[] = {{1, 1, 8, 2},  {2, 7, 15, 3},  {1, 63, 14, 2}, {2, 64, 16, 2},
                       {1, 65, 21, 3}, {2, 130, 32, 4}, {1, 200, 24, 8}, {3, 17, 64, 1}};

template <class T>
void check_against_naive(const Case& c, double tol) {
  const AttentionShape s{c.B, c.T, c.C, c.H};
  const auto qkv = randn<T>(c.B * c.T * 3 * c.C, 1, 1.5);
  const auto dout = randn<T>(c.B * c.T * c.C, 2);
  std::vector<T> out(size_t(c.B * c.T * c.C)), lse(size_t(c.B * c.H * c.T)), dqkv(qkv.size(), T(7));
  std::vector<T> out_n(out.size()), lse_n(lse.size()), dqkv_n(qkv.size());
  hddp::attention_forward(s, qkv.data(), out.data(), lse.data());
  hddp::attention_naive_forward(s, qkv.data(), out_n.data(), lse_n.data());
  EXPECT_LT(max_rel(out, out_n), tol) << "out, T=" << c.T << " C=" << c.C << " H=" << c.H;
  EXPECT_LT(max_rel(lse, lse_n), tol) << "lse, T=" << c.T;
  hddp::attention_backward(s, qkv.data(), out.data(), lse.data(), dout.data(), dqkv.data());
  hddp::attention_naive_backward(s, qkv.data(), out_n.data(), lse_n.data(), dout.data(), dqkv_n.data());
  EXPECT_LT(max_rel(dqkv, dqkv_n), tol * 4) << "dqkv, T=" << c.T << " C=" << c.C << " H=" << c.H;
}

TEST(Attention, FusedEqualsNaiveFloat) {
  for (const Case& c : kCases) check_against_naive<float>(c, 2e-5);
}

TEST(Attention, FusedEqualsNaiveDouble) {
  for (const Case& c : kCases) check_against_naive<double>(c, 1e-12);
}

// The first row sees only itself: out = v_0, lse = q.k / sqrt(D).
TEST(Attention, FirstPositionIsItsValue) {
  const AttentionShape s{1, 3, 4, 1};
  const auto qkv = randn<float>(3 * 12, 3);
  std::vector<float> out(12), lse(3);
  hddp::attention_forward(s, qkv.data(), out.data(), lse.data());
  for (int d = 0; d < 4; ++d) EXPECT_EQ(out[size_t(d)], qkv[size_t(8 + d)]);
  float qk = 0;
  for (int d = 0; d < 4; ++d) qk += qkv[size_t(d)] * qkv[size_t(4 + d)];
  EXPECT_NEAR(lse[0], qk / 2, 1e-6);
}

// d(sum(out * dout))/dqkv against central differences, in double.
TEST(Attention, GradientMatchesFiniteDifferences) {
  for (const Case& c : {Case{2, 5, 6, 2}, Case{1, 66, 6, 3}}) {
    const AttentionShape s{c.B, c.T, c.C, c.H};
    auto qkv = randn<double>(c.B * c.T * 3 * c.C, 4);
    const auto dout = randn<double>(c.B * c.T * c.C, 5);
    std::vector<double> out(dout.size()), lse(size_t(c.B * c.H * c.T)), dqkv(qkv.size());
    hddp::attention_forward(s, qkv.data(), out.data(), lse.data());
    hddp::attention_backward(s, qkv.data(), out.data(), lse.data(), dout.data(), dqkv.data());
    const auto loss = [&] {
      hddp::attention_forward(s, qkv.data(), out.data(), lse.data());
      double l = 0;
      for (size_t i = 0; i < out.size(); ++i) l += out[i] * dout[i];
      return l;
    };
    std::mt19937 g(6);
    for (int k = 0; k < 60; ++k) {
      const size_t i = g() % qkv.size();
      const double x = qkv[i], h = 1e-6;
      qkv[i] = x + h;
      const double lp = loss();
      qkv[i] = x - h;
      const double lm = loss();
      qkv[i] = x;
      EXPECT_NEAR(dqkv[i], (lp - lm) / (2 * h), 1e-7 * (1 + std::abs(dqkv[i]))) << "value " << i << ", T=" << c.T;
    }
  }
}

TEST(Attention, BitwiseAcrossThreadCounts) {
  const AttentionShape s{3, 150, 48, 3};
  const auto qkv = randn<float>(s.B * s.T * 3 * s.C, 7);
  const auto dout = randn<float>(s.B * s.T * s.C, 8);
  std::vector<float> ref_out, ref_d;
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    std::vector<float> out(dout.size()), lse(size_t(s.B * s.H * s.T)), dq(qkv.size());
    hddp::attention_forward(s, qkv.data(), out.data(), lse.data());
    hddp::attention_backward(s, qkv.data(), out.data(), lse.data(), dout.data(), dq.data());
    if (ref_out.empty()) ref_out = out, ref_d = dq;
    EXPECT_EQ(out, ref_out) << threads << " threads";
    EXPECT_EQ(dq, ref_d) << threads << " threads";
  }
}

TEST(Attention, BadShapesAreRefused) {
  std::vector<float> buf(64);
  EXPECT_THROW(hddp::attention_forward<float>({1, 4, 10, 3}, buf.data(), buf.data(), buf.data()), std::invalid_argument);
  EXPECT_THROW(hddp::attention_forward<float>({1, 0, 8, 2}, buf.data(), buf.data(), buf.data()), std::invalid_argument);
  EXPECT_THROW(hddp::attention_forward<float>({1, 4, 8, 2}, nullptr, buf.data(), buf.data()), std::invalid_argument);
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* want = std::getenv("HDDP_ATTENTION_KERNEL"); want && *want) {
    const std::string why = hddp::detail::isa_unsupported_reason(want, "HDDP_ATTENTION_KERNEL");
    if (!why.empty()) {
      std::printf("attention kernel set %s: NOT RUN, %s\n", want, why.c_str());
      return 77;
    }
  }
  std::printf("attention kernel set: %s\n", hddp::attention_kernel_name());
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
