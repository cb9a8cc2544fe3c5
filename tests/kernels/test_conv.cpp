// The direct convolution (kernels/conv.h) against its naive twin: shapes swept over 0, 1 and odd
// sizes, every padding, bias and fused ReLU on and off, both activation layouts, the gradients
// accumulated and overwritten; and bitwise the same for 1, 2 and 3 threads. Run once per
// micro-kernel set (HDDP_CONV_KERNEL, as ctest registers it), and once per path of the bf16
// products (HDDP_TEST_CONV_BF16: float, avx512bf16, amx, or amx-model: the AMX loops on the C++
// model of the tile unit, on any CPU); a set or path this CPU cannot execute exits 77 ("Not Run").
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <hddp/kernels/bf16.h>
#include <hddp/kernels/conv.h>
#include <hddp/kernels/conv/conv_ukernel.h>
#include <hddp/kernels/cpu_isa.h>

using namespace hddp;

namespace {

std::vector<float> randv(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> v(size_t(std::max<int64_t>(n, 1)));
  for (auto& x : v) x = float(double(rng() >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  return v;
}

// NHWC (B, P, C) <-> NCHW (B, C, P).
std::vector<float> nhwc_to_nchw(const std::vector<float>& x, int64_t B, int64_t P, int64_t C) {
  std::vector<float> y(x.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < P; ++p) y[size_t((b * C + c) * P + p)] = x[size_t((b * P + p) * C + c)];
  return y;
}

// |got - want| within a few float roundings of a sum of `terms` products of values below 1.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, int64_t n, double terms,
                  const std::string& what) {
  const double tol = 1e-6 * (terms + 4);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_NEAR(got[size_t(i)], want[size_t(i)], tol * std::max(1.0, std::fabs(double(want[size_t(i)]))))
        << what << " at " << i;
}

struct Case {
  ConvShape s;
  bool bias, relu, accumulate;
  ImageLayout layout;
  bool bf16 = false;  // products in bf16: the passes the path takes checked against the naive twin on
                      // rounded operands, the others against it in float
};

std::vector<float> rounded(std::vector<float> v) {
  round_bf16(int64_t(v.size()), v.data(), v.data());
  return v;
}

std::string describe(const Case& c) {
  const ConvShape& s = c.s;
  return "B=" + std::to_string(s.B) + " C=" + std::to_string(s.C) + " H=" + std::to_string(s.H) + " W=" +
         std::to_string(s.W) + " Cout=" + std::to_string(s.Cout) + " k=" + std::to_string(s.k) + " pad=" +
         std::to_string(s.pad) + (c.bias ? " bias" : "") + (c.relu ? " relu" : "") +
         (c.accumulate ? " accumulate" : "") + (c.layout == ImageLayout::NCHW ? " nchw" : " nhwc") +
         (c.bf16 ? " bf16" : "");
}

void check_case(const Case& c) {
  const ConvShape& s = c.s;
  SCOPED_TRACE(describe(c));
  const int64_t nx = s.B * s.H * s.W * s.C, ny = s.B * s.OH() * s.OW() * s.Cout, nw = s.Cout * s.C * s.k * s.k;
  const auto X = randv(nx, 1), Wt = randv(nw, 2), b = randv(s.Cout, 3), dY = randv(ny, 4);
  const float* bias = c.bias ? b.data() : nullptr;
  // Naive, NHWC; a pass in bf16 on the rounded operands (the sums and the bias stay float).
  const detail::ConvBf16Passes on = c.bf16 ? detail::conv_bf16_passes(s) : detail::ConvBf16Passes{};
  const auto Xr = rounded(X), Wr = rounded(Wt), dYr = rounded(dY);
  std::vector<float> y_ref(size_t(std::max<int64_t>(ny, 1)));
  conv_naive_forward(s, (on.forward ? Xr : X).data(), (on.forward ? Wr : Wt).data(), bias, c.relu, y_ref.data());
  auto dW_ref = randv(nw, 5), db_ref = randv(s.Cout, 6);
  auto dW = dW_ref, db = db_ref;
  std::vector<float> dX_ref(size_t(std::max<int64_t>(nx, 1))), scratch_dx(dX_ref.size());
  auto dW_unused = dW_ref;
  // dX from the input gradient's operands; dW from the weight gradient's; db from dY in float.
  conv_naive_backward(s, X.data(), (on.input_gradient ? Wr : Wt).data(), (on.input_gradient ? dYr : dY).data(),
                      c.relu ? y_ref.data() : nullptr, dX_ref.data(), dW_unused.data(), nullptr, c.accumulate);
  conv_naive_backward(s, (on.weight_gradient ? Xr : X).data(), Wt.data(), (on.weight_gradient ? dYr : dY).data(),
                      c.relu ? y_ref.data() : nullptr, scratch_dx.data(), dW_ref.data(), nullptr, c.accumulate);
  if (bias) {
    auto dW_db = dW_unused;
    conv_naive_backward(s, X.data(), Wt.data(), dY.data(), c.relu ? y_ref.data() : nullptr, scratch_dx.data(),
                        dW_db.data(), db_ref.data(), c.accumulate);
  }
  // Direct, in the case's layout.
  const bool nchw = c.layout == ImageLayout::NCHW;
  const auto Xl = nchw ? nhwc_to_nchw(X, s.B, s.H * s.W, s.C) : X;
  const auto dYl = nchw ? nhwc_to_nchw(dY, s.B, s.OH() * s.OW(), s.Cout) : dY;
  std::vector<float> scratch(size_t(std::max(conv_direct_forward_scratch(s), conv_direct_backward_scratch(s))) + 1,
                             NAN);
  std::vector<float> y(size_t(std::max<int64_t>(ny, 1)), NAN), dX(size_t(std::max<int64_t>(nx, 1)), NAN);
  conv_direct_forward(s, c.layout, c.layout, Xl.data(), Wt.data(), bias, c.relu, y.data(), scratch.data(), 0, nullptr,
                      c.bf16);
  const auto y_want = nchw ? nhwc_to_nchw(y_ref, s.B, s.OH() * s.OW(), s.Cout) : y_ref;
  expect_close(y, y_want, ny, double(s.k * s.k * s.C), "Y");
  conv_direct_backward(s, c.layout, c.layout, Xl.data(), Wt.data(), dYl.data(), c.relu ? y.data() : nullptr,
                       dX.data(), dW.data(), bias ? db.data() : nullptr, c.accumulate, scratch.data(), 0, nullptr,
                       c.bf16);
  const auto dX_want = nchw ? nhwc_to_nchw(dX_ref, s.B, s.H * s.W, s.C) : dX_ref;
  expect_close(dX, dX_want, nx, double(s.k * s.k * s.Cout), "dX");
  expect_close(dW, dW_ref, nw, double(s.B * s.OH() * s.OW()), "dW");
  if (bias) expect_close(db, db_ref, s.Cout, double(s.B * s.OH() * s.OW()), "db");
}

TEST(ConvDirect, AgreesWithNaiveTwin) {
  int n = 0;
  for (int64_t k : {1, 2, 3, 5})
    for (int64_t pad = 0; pad < k; ++pad)
      for (int64_t B : {0, 1, 3})
        for (int64_t C : {1, 3, 17})
          for (int64_t Cout : {1, 5, 16, 33})
            for (int64_t HW : {int64_t(1), int64_t(6), int64_t(15)}) {
              if (k > HW + 2 * pad) continue;
              const bool odd = (n++ % 2) == 1;
              check_case({{B, C, HW, HW + 1, Cout, k, pad}, odd, !odd, (n % 3) == 0,
                          (n % 4) < 2 ? ImageLayout::NHWC : ImageLayout::NCHW});
              if (HasFatalFailure()) return;
            }
}

// bf16 products (on the path under test; shapes it does not take on the float kernels over
// rounded operands): every pass against the naive twin on the rounded operands, over odd and even
// K, and channels in whole AMX tiles (C 16 with k 2, C 32) and not.
TEST(ConvDirect, Bf16AgreesWithNaiveTwinOnRoundedOperands) {
  int n = 0;
  for (int64_t k : {1, 2, 3})
    for (int64_t pad = 0; pad < k; ++pad)
      for (int64_t B : {1, 3})
        for (int64_t C : {1, 3, 4, 16, 17, 32})
          for (int64_t Cout : {5, 33})
            for (int64_t HW : {int64_t(6), int64_t(15)}) {
              const bool odd = (n++ % 2) == 1;
              check_case({{B, C, HW, HW + 1, Cout, k, pad}, odd, !odd, (n % 3) == 0,
                          (n % 4) < 2 ? ImageLayout::NHWC : ImageLayout::NCHW, true});
              if (HasFatalFailure()) return;
            }
  for (bool relu : {false, true}) {
    check_case({{5, 1, 28, 28, 32, 3, 1}, true, relu, false, ImageLayout::NHWC, true});
    check_case({{5, 32, 14, 14, 64, 3, 1}, true, relu, true, ImageLayout::NHWC, true});
  }
}

// bf16 on a bf16 unit rounds: the result is not the float one (the products did read bf16
// values); on the float path it is the float one, bit for bit.
TEST(ConvDirect, Bf16IsNotTheFloatResultWhereAUnitRunsIt) {
  const ConvShape s{2, 32, 6, 6, 16, 3, 1};
  const auto X = randv(s.B * s.H * s.W * s.C, 41), Wt = randv(s.Cout * s.C * 9, 42);
  std::vector<float> scratch(size_t(conv_direct_forward_scratch(s))), y(size_t(s.B * 36 * 16)), yh(y.size());
  conv_direct_forward(s, ImageLayout::NHWC, ImageLayout::NHWC, X.data(), Wt.data(), nullptr, false, y.data(),
                      scratch.data());
  conv_direct_forward(s, ImageLayout::NHWC, ImageLayout::NHWC, X.data(), Wt.data(), nullptr, false, yh.data(),
                      scratch.data(), 0, nullptr, true);
  int differ = 0;
  for (size_t i = 0; i < y.size(); ++i) differ += y[i] != yh[i];
  if (detail::conv_bf16_passes(s).forward) {
    EXPECT_GT(differ, int(y.size() / 2));
  } else {
    EXPECT_EQ(differ, 0) << "a pass no bf16 unit takes runs in float";
  }
}

TEST(ConvDirect, TheCnnShapes) {
  for (bool relu : {false, true}) {
    check_case({{5, 1, 28, 28, 32, 3, 1}, true, relu, false, ImageLayout::NHWC});
    check_case({{5, 32, 14, 14, 64, 3, 1}, true, relu, true, ImageLayout::NHWC});
    check_case({{3, 64, 7, 7, 128, 3, 1}, false, relu, false, ImageLayout::NCHW});
  }
}

// Every output bit the same for 1, 2 and 3 threads (the work split depends on the shapes alone).
TEST(ConvDirect, BitwiseAcrossThreadCounts) {
  for (bool bf16 : {false, true})
  for (const ConvShape s : {ConvShape{19, 32, 14, 14, 64, 3, 1}, ConvShape{23, 1, 28, 28, 32, 3, 1}}) {
    const int64_t nx = s.B * s.H * s.W * s.C, ny = s.B * s.OH() * s.OW() * s.Cout, nw = s.Cout * s.C * s.k * s.k;
    const auto X = randv(nx, 11), Wt = randv(nw, 12), b = randv(s.Cout, 13), dY = randv(ny, 14);
    std::vector<float> scratch(size_t(conv_direct_backward_scratch(s) + conv_direct_forward_scratch(s)));
    std::vector<std::vector<float>> outs;
    for (int threads : {1, 2, 3}) {
      omp_set_num_threads(threads);
      std::vector<float> y(static_cast<size_t>(ny)), dX(static_cast<size_t>(nx)), dW(static_cast<size_t>(nw)),
          db(static_cast<size_t>(s.Cout));
      conv_direct_forward(s, ImageLayout::NHWC, ImageLayout::NHWC, X.data(), Wt.data(), b.data(), true, y.data(),
                          scratch.data(), 0, nullptr, bf16);
      conv_direct_backward(s, ImageLayout::NHWC, ImageLayout::NHWC, X.data(), Wt.data(), dY.data(), y.data(),
                           dX.data(), dW.data(), db.data(), false, scratch.data(), 0, nullptr, bf16);
      y.insert(y.end(), dX.begin(), dX.end());
      y.insert(y.end(), dW.begin(), dW.end());
      y.insert(y.end(), db.begin(), db.end());
      outs.push_back(std::move(y));
    }
    omp_set_num_threads(omp_get_num_procs());
    for (size_t i = 1; i < outs.size(); ++i) ASSERT_TRUE(outs[i] == outs[0]) << "threads " << i + 1 << " vs 1";
  }
}

// The forward with MaxPool2d in its store gives bit for bit the unfused forward then pooling
// (PyTorch's rule: ties to the first, NaN wins), and its backward the unfused backward of the
// gradient routed through the windows; odd sizes leave rows and columns out of every window.
TEST(ConvDirect, FusedPoolingIsConvThenPool) {
  for (bool bf16 : {false, true})
  for (const ConvShape s : {ConvShape{3, 32, 14, 14, 64, 3, 1}, ConvShape{2, 1, 28, 28, 32, 3, 1},
                            ConvShape{2, 5, 7, 9, 20, 3, 1}, ConvShape{1, 3, 8, 8, 17, 2, 0}})
    for (int64_t pool : {2, 3}) {
      if (pool > s.OH() || pool > s.OW()) continue;
      SCOPED_TRACE("C=" + std::to_string(s.C) + " H=" + std::to_string(s.H) + " pool=" + std::to_string(pool));
      const int64_t OH = s.OH(), OW = s.OW(), PH = OH / pool, PW = OW / pool, Co = s.Cout;
      const int64_t nx = s.B * s.H * s.W * s.C, ny = s.B * OH * OW * Co, np = s.B * PH * PW * Co,
                    nw = Co * s.C * s.k * s.k;
      auto X = randv(nx, 21);
      for (size_t i = 0; i < X.size(); i += 7) X[i] = 0.5f;  // ties after ReLU
      X[1] = NAN;
      const auto Wt = randv(nw, 22), b = randv(Co, 23), dP = randv(np, 24);
      std::vector<float> scratch(size_t(conv_direct_forward_scratch(s) + conv_direct_backward_scratch(s)));
      const auto nhwc = ImageLayout::NHWC;
      // Unfused: the convolution with ReLU, then pooling and routing by hand.
      std::vector<float> y(static_cast<size_t>(ny)), pooled(static_cast<size_t>(np)), dY(static_cast<size_t>(ny), 0.0f);
      std::vector<uint8_t> am(static_cast<size_t>(np));
      conv_direct_forward(s, nhwc, nhwc, X.data(), Wt.data(), b.data(), true, y.data(), scratch.data(), 0, nullptr,
                          bf16);
      for (int64_t bi = 0; bi < s.B; ++bi)
        for (int64_t ph = 0; ph < PH; ++ph)
          for (int64_t pw = 0; pw < PW; ++pw)
            for (int64_t c = 0; c < Co; ++c) {
              float best = -INFINITY;
              int at = 0;
              for (int w = 0; w < pool * pool; ++w) {
                const float v = y[size_t(((bi * OH + ph * pool + w / pool) * OW + pw * pool + w % pool) * Co + c)];
                if (v > best || std::isnan(v)) best = v, at = w;
              }
              const size_t o = size_t(((bi * PH + ph) * PW + pw) * Co + c);
              pooled[o] = best, am[o] = uint8_t(at);
              dY[size_t(((bi * OH + ph * pool + at / pool) * OW + pw * pool + at % pool) * Co + c)] = dP[o];
            }
      std::vector<float> dX(static_cast<size_t>(nx)), dW(static_cast<size_t>(nw)), db(static_cast<size_t>(Co));
      conv_direct_backward(s, nhwc, nhwc, X.data(), Wt.data(), dY.data(), y.data(), dX.data(), dW.data(), db.data(),
                           false, scratch.data(), 0, nullptr, bf16);
      // Fused.
      std::vector<float> fp(static_cast<size_t>(np), NAN), fdX(static_cast<size_t>(nx), NAN), fdW(static_cast<size_t>(nw), NAN),
          fdb(static_cast<size_t>(Co), NAN);
      std::vector<uint8_t> fam(static_cast<size_t>(np), 99);
      conv_direct_forward(s, nhwc, nhwc, X.data(), Wt.data(), b.data(), true, fp.data(), scratch.data(), pool,
                          fam.data(), bf16);
      for (size_t i = 0; i < fp.size(); ++i) {
        ASSERT_TRUE(fp[i] == pooled[i] || (std::isnan(fp[i]) && std::isnan(pooled[i]))) << "pooled " << i;
        ASSERT_EQ(fam[i], am[i]) << "argmax " << i;
      }
      conv_direct_backward(s, nhwc, nhwc, X.data(), Wt.data(), dP.data(), fp.data(), fdX.data(), fdW.data(),
                           fdb.data(), false, scratch.data(), pool, fam.data(), bf16);
      auto same = [](const std::vector<float>& a, const std::vector<float>& b2) {
        for (size_t i = 0; i < a.size(); ++i)
          if (!(a[i] == b2[i] || (std::isnan(a[i]) && std::isnan(b2[i])))) return false;
        return true;
      };
      EXPECT_TRUE(same(fdX, dX)) << "dX";
      EXPECT_TRUE(same(fdW, dW)) << "dW";
      EXPECT_TRUE(same(fdb, db)) << "db";
    }
}

TEST(ConvDirect, RefusesWhatItDoesNotTake) {
  EXPECT_FALSE(conv_direct_supported(3, 2, 1));
  EXPECT_FALSE(conv_direct_supported(3, 1, 3));
  EXPECT_FALSE(conv_direct_supported(17, 1, 0));
  EXPECT_TRUE(conv_direct_supported(3, 1, 2));
  std::vector<float> buf(4096);
  EXPECT_THROW(conv_direct_forward({1, 1, 4, 4, 1, 3, 3}, ImageLayout::NHWC, ImageLayout::NHWC, buf.data(), buf.data(),
                                   nullptr, false, buf.data(), buf.data()),
               std::invalid_argument);
  EXPECT_THROW(conv_direct_forward({1, 1, 1, 1, 1, 5, 1}, ImageLayout::NHWC, ImageLayout::NHWC, buf.data(), buf.data(),
                                   nullptr, false, buf.data(), buf.data()),
               std::invalid_argument);
  EXPECT_THROW(conv_direct_forward({1, 1, 4, 4, 1, 3, 1}, ImageLayout::NHWC, ImageLayout::NHWC, nullptr, buf.data(),
                                   nullptr, false, buf.data(), buf.data()),
               std::invalid_argument);
  std::vector<uint8_t> am(64);
  EXPECT_THROW(conv_direct_forward({1, 1, 4, 4, 1, 3, 1}, ImageLayout::NHWC, ImageLayout::NCHW, buf.data(), buf.data(),
                                   nullptr, false, buf.data(), buf.data(), 2, am.data()),
               std::invalid_argument);  // pooling writes NHWC only
  EXPECT_THROW(conv_direct_forward({1, 1, 4, 4, 1, 3, 1}, ImageLayout::NHWC, ImageLayout::NHWC, buf.data(), buf.data(),
                                   nullptr, false, buf.data(), buf.data(), 5, am.data()),
               std::invalid_argument);  // a window larger than the output
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* path = std::getenv("HDDP_TEST_CONV_BF16"); path && *path) {
    const std::string p = path;
    const bool amx = detail::cpu_has_amx_bf16() && detail::amx_permission_error().empty();
    const bool dp = detail::cpu_has_avx512_bf16() && detail::conv_kernels().blocking->isa == "avx512";
    if ((p == "amx" && !amx) || (p == "avx512bf16" && !dp)) {
      std::printf("bf16 path %s: NOT RUN, this CPU (or its OS, or the set) lacks it\n", path);
      return 77;
    }
    using detail::ConvBf16Path;
    if (p == "amx") detail::set_conv_bf16_path(ConvBf16Path::Amx);
    else if (p == "amx-model") detail::set_conv_bf16_path(ConvBf16Path::AmxModel);
    else if (p == "avx512bf16") detail::set_conv_bf16_path(ConvBf16Path::Avx512Bf16);
    else if (p == "float") detail::set_conv_bf16_path(ConvBf16Path::Float);
    else {
      std::printf("HDDP_TEST_CONV_BF16=%s: expected float, avx512bf16, amx or amx-model\n", path);
      return 2;
    }
  }
  std::printf("bf16 products on: %s\n", detail::to_string(detail::conv_bf16_path()));
  const char* want = std::getenv("HDDP_CONV_KERNEL");
  if (want && *want) {
    const std::string why = detail::isa_unsupported_reason(want, "HDDP_CONV_KERNEL");  // throws if unknown
    if (!why.empty()) {
      std::printf("convolution kernel set %s: NOT RUN, %s\n", want, why.c_str());
      return 77;
    }
  }
  std::printf("convolution kernel set under test: %s\n", conv_kernel_name().c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
