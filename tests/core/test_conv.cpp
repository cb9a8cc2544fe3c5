// Conv2d, MaxPool2d, Flatten and Dropout: forward and backward against PyTorch 1.13
// (data/conv_reference.txt, from gen_conv_reference.py), every backward against central
// differences in double, a small CNN's gradient, bitwise equal results at 1 and 2 OpenMP
// threads, Dropout's mask, PyTorch's initialisation bounds, and bad shapes named by layer.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <hddp/core/conv.h>
#include <hddp/core/layers.h>
#include <hddp/core/model.h>
#include "tests/common/gradcheck.h"
#include "tests/common/testing.h"
#include <hddp/core/rng.h>
#include "tests/common/mse.h"

#ifndef HDDP_CORE_TEST_DATA
#error "HDDP_CORE_TEST_DATA must name tests/core/data"
#endif

using namespace hddp;
using namespace hddp::testing_util;

namespace {

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// The reference file: records "conv ...", "pool ...", "cnn ..." with named value lists up to
// "end", and one-line "dropout p scale32 scale64".
struct Record {
  std::string kind;
  std::vector<double> head;  // the numbers on the record's first line
  std::map<std::string, std::vector<double>> v;
};

const std::vector<Record>& reference() {
  static const std::vector<Record> records = [] {
    const std::string path = std::string(HDDP_CORE_TEST_DATA) + "/conv_reference.txt";
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<Record> out;
    std::string line;
    Record* cur = nullptr;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      std::string word;
      in >> word;
      if (word == "torch") continue;
      if (word == "end") {
        cur = nullptr;
        continue;
      }
      if (!cur) {  // a record's first line
        out.push_back({word, {}, {}});
        for (double d; in >> d;) out.back().head.push_back(d);
        if (word != "dropout") cur = &out.back();
        continue;
      }
      std::vector<double>& vals = cur->v[word];
      if (word == "loss") {
        double d;
        in >> d;
        vals.push_back(d);
        continue;
      }
      size_t n = 0;
      in >> n;
      vals.resize(n);
      for (double& d : vals) in >> d;
      if (!in) throw std::runtime_error("short record '" + word + "' in " + path);
    }
    return out;
  }();
  return records;
}

// Largest |a - b| / (1 + |b|) over two lists of the same length.
template <class T>
double max_rel_err(const std::vector<T>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double e = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    e = std::max(e, std::fabs(double(a[i]) - b[i]) / (1 + std::fabs(b[i])));
  return e;
}

template <class T>
constexpr double tol() {
  return sizeof(T) == 4 ? 1e-5 : 1e-12;
}

template <class T>
void conv_matches_pytorch() {
  int cases = 0;
  double worst = 0;
  for (const Record& r : reference()) {
    if (r.kind != "conv") continue;
    ++cases;
    const auto h = r.head;
    const int64_t B = int64_t(h[0]), C = int64_t(h[1]), H = int64_t(h[2]), W = int64_t(h[3]), Cout = int64_t(h[4]),
                  k = int64_t(h[5]), s = int64_t(h[6]), p = int64_t(h[7]);
    const bool bias = h[8] != 0;
    const std::string what = "conv B=" + std::to_string(B) + " C=" + std::to_string(C) + " " + std::to_string(H) +
                             "x" + std::to_string(W) + " Cout=" + std::to_string(Cout) + " k=" + std::to_string(k) +
                             " s=" + std::to_string(s) + " p=" + std::to_string(p);
    const auto x = as<T>(r.v.at("x")), w = as<T>(r.v.at("weight")), b = as<T>(r.v.at("bias")), dy = as<T>(r.v.at("dy"));
    std::vector<T> y(r.v.at("y").size(), T(7)), dx(x.size(), T(7)), dw(w.size(), T(7)), db(size_t(Cout), T(7));
    std::vector<T> scratch(size_t(conv2d_scratch_size(B, C, H, W, Cout, k, s, p)));
    conv2d_forward<T>(B, C, H, W, Cout, k, s, p, x.data(), w.data(), bias ? b.data() : nullptr, y.data(), scratch.data());
    // Overwrite (accumulate = false) over stale values.
    conv2d_backward<T>(B, C, H, W, Cout, k, s, p, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                       bias ? db.data() : nullptr, scratch.data(), false);
    const double e[] = {max_rel_err(y, r.v.at("y")), max_rel_err(dx, r.v.at("dx")), max_rel_err(dw, r.v.at("dweight")),
                        bias ? max_rel_err(std::vector<T>(db.begin(), db.end()), r.v.at("dbias")) : 0.0};
    const char* names[] = {"y", "dx", "dweight", "dbias"};
    for (int i = 0; i < 4; ++i) {
      EXPECT_LE(e[i], tol<T>()) << what << " " << names[i];
      worst = std::max(worst, e[i]);
    }
    // A second backward adds to dW and db (the sums may add into them in another order) and
    // overwrites dX: over stale values, dX is PyTorch's again, not twice it. A third with no dX
    // (a first layer) still adds its dW and db: three times PyTorch's.
    auto times = [](const std::vector<double>& v, double f) {
      std::vector<double> o(v);
      for (double& e : o) e *= f;
      return o;
    };
    std::fill(dx.begin(), dx.end(), T(7));
    conv2d_backward<T>(B, C, H, W, Cout, k, s, p, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                       bias ? db.data() : nullptr, scratch.data(), true);
    EXPECT_LE(max_rel_err(dx, r.v.at("dx")), tol<T>()) << what << " dx after an accumulating backward";
    EXPECT_LE(max_rel_err(dw, times(r.v.at("dweight"), 2)), 2 * tol<T>()) << what << " dweight, twice";
    if (bias) {
      EXPECT_LE(max_rel_err(db, times(r.v.at("dbias"), 2)), 2 * tol<T>()) << what << " dbias, twice";
    }
    conv2d_backward<T>(B, C, H, W, Cout, k, s, p, x.data(), w.data(), dy.data(), nullptr, dw.data(),
                       bias ? db.data() : nullptr, scratch.data(), true);
    EXPECT_LE(max_rel_err(dw, times(r.v.at("dweight"), 3)), 3 * tol<T>()) << what << " dweight, three times";
    if (bias) {
      EXPECT_LE(max_rel_err(db, times(r.v.at("dbias"), 3)), 3 * tol<T>()) << what << " dbias, three times";
    }
  }
  EXPECT_GE(cases, 10);
  std::printf("[conv vs PyTorch, %s] %d cases, largest |ours - torch| / (1 + |torch|) = %.3g\n",
              sizeof(T) == 4 ? "float" : "double", cases, worst);
}

TEST(ConvPyTorch, Conv2dForwardBackward) {
  conv_matches_pytorch<double>();
  conv_matches_pytorch<float>();
}

template <class T>
void pool_matches_pytorch() {
  int cases = 0;
  for (const Record& r : reference()) {
    if (r.kind != "pool") continue;
    ++cases;
    const int64_t B = int64_t(r.head[0]), C = int64_t(r.head[1]), H = int64_t(r.head[2]), W = int64_t(r.head[3]),
                  k = int64_t(r.head[4]), s = int64_t(r.head[5]);
    const std::string what = "pool " + std::to_string(H) + "x" + std::to_string(W) + " k=" + std::to_string(k) +
                             " s=" + std::to_string(s);
    const auto x = as<T>(r.v.at("x")), dy = as<T>(r.v.at("dy"));
    std::vector<T> y(dy.size()), am(dy.size()), dx(x.size(), T(7));
    maxpool2d_forward<T>(B, C, H, W, k, s, x.data(), y.data(), am.data());
    maxpool2d_backward<T>(B, C, H, W, k, s, am.data(), dy.data(), dx.data());
    const int64_t OW = conv_out_size(W, k, s, 0), OH = conv_out_size(H, k, s, 0);
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_EQ(double(y[i]), r.v.at("y")[i]) << what << " y[" << i << "]";
      // Our window position as PyTorch's index in the plane: ties resolved alike.
      const int64_t o = int64_t(i) % (OH * OW), oh = o / OW, ow = o % OW, a = int64_t(am[i]);
      EXPECT_EQ(double((oh * s + a / k) * W + ow * s + a % k), r.v.at("index")[i]) << what << " index[" << i << "]";
    }
    EXPECT_LE(max_rel_err(dx, r.v.at("dx")), sizeof(T) == 4 ? 1e-6 : 1e-15) << what;
  }
  EXPECT_GE(cases, 8);
}

TEST(ConvPyTorch, MaxPool2dForwardBackwardAndTies) {
  pool_matches_pytorch<double>();
  pool_matches_pytorch<float>();
}

TEST(ConvPyTorch, DropoutScaleIsPyTorchs) {
  int cases = 0;
  for (const Record& r : reference()) {
    if (r.kind != "dropout") continue;
    ++cases;
    const double p = r.head[0];
    const int64_t n = 1000;
    std::vector<float> xf(n, 1.0f), yf(n), mf(n);
    std::vector<double> xd(n, 1.0), yd(n), md(n);
    dropout_forward<float>(n, p, 3, xf.data(), yf.data(), mf.data());
    dropout_forward<double>(n, p, 3, xd.data(), yd.data(), md.data());
    for (int64_t i = 0; i < n; ++i) {
      if (yf[i] != 0.0f) {
        EXPECT_EQ(yf[i], float(r.head[1])) << "p=" << p;
      }
      if (yd[i] != 0.0) {
        EXPECT_EQ(yd[i], r.head[2]) << "p=" << p;
      }
      EXPECT_EQ(yf[i] != 0.0f, yd[i] != 0.0) << "float and double draw the same mask";
    }
  }
  EXPECT_GE(cases, 5);
}

// The reference CNN, its parameters from the file, as a Sequential of T.
std::vector<LayerSpec> reference_cnn() {
  return {Conv2d(3, 4, 3, 1, 1), ReLU(), MaxPool2d(2), Conv2d(4, 5, 3, 2, 2), ReLU(), MaxPool2d(2, 1), Flatten(),
          Linear(45, 3)};
}

template <class T>
void cnn_matches_pytorch(const Record& r) {
  const int64_t B = int64_t(r.head[0]);
  Sequential<T> m({3, 12, 10}, reference_cnn(), B);
  ASSERT_EQ(m.num_params(), int64_t(r.v.at("params").size()));
  std::vector<std::string> names;
  for (const ParamView& v : m.param_views()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias"}));
  const auto params = as<T>(r.v.at("params")), x = as<T>(r.v.at("x")), target = as<T>(r.v.at("target"));
  std::copy(params.begin(), params.end(), m.params());
  const T* y = m.forward(x, B);
  EXPECT_LE(max_rel_err(std::vector<T>(y, y + B * 3), r.v.at("y")), tol<T>());
  EXPECT_NEAR(double(hddp::testing::mse_of(m, target.data())), r.v.at("loss")[0], tol<T>() * (1 + r.v.at("loss")[0]));
  m.zero_grad();
  hddp::testing::backward_mse(m, target.data());
  const double e = max_rel_err(std::vector<T>(m.grads(), m.grads() + m.num_params()), r.v.at("grads"));
  EXPECT_LE(e, tol<T>());
  std::printf("[CNN vs PyTorch, %s] gradients: largest |ours - torch| / (1 + |torch|) = %.3g\n",
              sizeof(T) == 4 ? "float" : "double", e);
}

TEST(ConvPyTorch, SmallCnnAsSequential) {
  const Record* r = nullptr;
  for (const Record& rec : reference())
    if (rec.kind == "cnn") r = &rec;
  ASSERT_NE(r, nullptr);
  cnn_matches_pytorch<double>(*r);
  cnn_matches_pytorch<float>(*r);
}

// L = sum(R .* Y): dY = R; every gradient against central differences.
TEST(ConvGradient, Conv2dFiniteDifferences) {
  struct Case {
    int64_t B, C, H, W, Cout, k, s, p;
    bool bias;
  };
  for (const Case& c : {Case{2, 3, 6, 5, 2, 3, 1, 1, true}, Case{1, 2, 7, 7, 3, 3, 2, 2, false},
                       Case{2, 1, 5, 6, 2, 2, 2, 0, true}, Case{1, 3, 3, 4, 2, 5, 1, 2, true}}) {
    const int64_t OH = conv_out_size(c.H, c.k, c.s, c.p), OW = conv_out_size(c.W, c.k, c.s, c.p);
    auto X = randv(c.B * c.C * c.H * c.W, 1), Wt = randv(c.Cout * c.C * c.k * c.k, 2), b = randv(c.Cout, 3),
         R = randv(c.B * c.Cout * OH * OW, 4);
    std::vector<double> Y(R.size()), dX(X.size()), dW(Wt.size()), db(b.size());
    std::vector<double> scratch(size_t(conv2d_scratch_size(c.B, c.C, c.H, c.W, c.Cout, c.k, c.s, c.p)));
    auto loss = [&] {
      conv2d_forward<double>(c.B, c.C, c.H, c.W, c.Cout, c.k, c.s, c.p, X.data(), Wt.data(), c.bias ? b.data() : nullptr,
                             Y.data(), scratch.data());
      return dot(R, Y.data());
    };
    conv2d_backward<double>(c.B, c.C, c.H, c.W, c.Cout, c.k, c.s, c.p, X.data(), Wt.data(), R.data(), dX.data(),
                            dW.data(), c.bias ? db.data() : nullptr, scratch.data(), false);
    const std::string what = "k=" + std::to_string(c.k) + " s=" + std::to_string(c.s) + " p=" + std::to_string(c.p);
    for (size_t i = 0; i < X.size(); ++i) expect_grad_near(dX[i], central_diff(loss, &X[i]), what + " dX " + std::to_string(i));
    for (size_t i = 0; i < Wt.size(); ++i) expect_grad_near(dW[i], central_diff(loss, &Wt[i]), what + " dW " + std::to_string(i));
    for (size_t i = 0; c.bias && i < b.size(); ++i) expect_grad_near(db[i], central_diff(loss, &b[i]), what + " db " + std::to_string(i));
  }
}

TEST(ConvGradient, MaxPool2dFiniteDifferences) {
  struct Case {
    int64_t B, C, H, W, k, s;
  };
  for (const Case& c : {Case{2, 2, 6, 7, 2, 2}, Case{1, 3, 7, 5, 3, 1}, Case{1, 2, 9, 8, 3, 2}}) {
    const int64_t OH = conv_out_size(c.H, c.k, c.s, 0), OW = conv_out_size(c.W, c.k, c.s, 0);
    auto X = randv(c.B * c.C * c.H * c.W, 5), R = randv(c.B * c.C * OH * OW, 6);
    std::vector<double> Y(R.size()), am(R.size()), dX(X.size());
    auto loss = [&] {
      maxpool2d_forward<double>(c.B, c.C, c.H, c.W, c.k, c.s, X.data(), Y.data(), am.data());
      return dot(R, Y.data());
    };
    loss();
    maxpool2d_backward<double>(c.B, c.C, c.H, c.W, c.k, c.s, am.data(), R.data(), dX.data());
    for (size_t i = 0; i < X.size(); ++i) expect_grad_near(dX[i], central_diff(loss, &X[i]), "maxpool dX " + std::to_string(i));
  }
}

TEST(ConvGradient, SmallCnnOn28x28) {
  Rng rng(21);
  Sequential<double> m({1, 28, 28},
                       {Conv2d(1, 4, 3, 1, 1), ReLU(), MaxPool2d(2), Conv2d(4, 8, 3, 1, 1), ReLU(), MaxPool2d(2), Flatten(),
                        Linear(8 * 7 * 7, 10)},
                       2, rng);
  EXPECT_EQ(m.output_shape(), Shape{10});
  EXPECT_EQ(m.shape_before(6), (Shape{8, 7, 7}));
  expect_model_gradient(m, randv(2 * 784, 22), randv(2 * 10, 23), 2, 3);
}

TEST(ConvGradient, FlattenAndDropoutInAModel) {
  // Flatten after ReLU (in place) gets a buffer of its own and copies; Dropout in training.
  Rng rng(31);
  Sequential<double> m({2, 3, 3}, {ReLU(), Flatten(), Linear(18, 6), Dropout(0.4), Tanh(), Linear(6, 2)}, 3, rng);
  m.set_seed(77);
  expect_model_gradient(m, randv(3 * 18, 32), randv(3 * 2, 33), 3);
  // Flatten first: in place over the model's input copy; Dropout in evaluation is the identity.
  Sequential<double> e({2, 2, 2}, {Flatten(), Dropout(0.5), Linear(8, 3)}, 4, rng);
  e.set_training(false);
  expect_model_gradient(e, randv(4 * 8, 34), randv(4 * 3, 35), 4);
  EXPECT_EQ(m.layer(1).name(), "Flatten()");
  EXPECT_EQ(m.layer(3).name(), "Dropout(p=0.4)");
}

// The CNN of the benchmarks, at batch 16 in float: forward output and gradients bit for bit at
// 1 and 2 OpenMP threads.
TEST(ConvThreads, CnnBitwiseAtOneAndTwoThreads) {
  const std::vector<LayerSpec> cnn = {Conv2d(1, 32, 3, 1, 1), ReLU(), MaxPool2d(2), Conv2d(32, 64, 3, 1, 1), ReLU(),
                                      MaxPool2d(2), Flatten(), Linear(3136, 128)};
  const int64_t B = 16;
  const auto X = as<float>(randv(B * 784, 41)), T = as<float>(randv(B * 128, 42));
  std::vector<float> out[2], grads[2];
  const int saved = omp_get_max_threads();
  for (int t = 1; t <= 2; ++t) {
    omp_set_num_threads(t);
    Rng rng(40);
    Sequential<float> m({1, 28, 28}, cnn, B, rng);
    const float* y = m.forward(X, B);
    out[t - 1].assign(y, y + B * 128);
    m.zero_grad();
    hddp::testing::backward_mse(m, T.data());
    grads[t - 1].assign(m.grads(), m.grads() + m.num_params());
  }
  omp_set_num_threads(saved);
  EXPECT_TRUE(out[0] == out[1]) << "forward differs between 1 and 2 threads";
  EXPECT_TRUE(grads[0] == grads[1]) << "gradients differ between 1 and 2 threads";
}

// Conv2d in groups of images (kConvGroupValues: 6 images a GEMM here, 9 in groups of 5 and 4)
// gives what it gives one image at a time.
TEST(ConvThreads, BatchInGroupsOfImages) {
  const int64_t C = 8, H = 32, W = 32, Cout = 4, k = 3, B = 9, P = H * W;
  ASSERT_EQ(conv2d_group_images(C * k * k, Cout, P), 6);
  const auto X = randv(B * C * H * W, 51), Wt = randv(Cout * C * k * k, 52), b = randv(Cout, 53),
             dY = randv(B * Cout * P, 54);
  std::vector<double> scratch(size_t(conv2d_scratch_size(B, C, H, W, Cout, k, 1, 1)));
  std::vector<double> Y(size_t(B * Cout * P)), dX(X.size()), dW(Wt.size()), db(b.size());
  conv2d_forward<double>(B, C, H, W, Cout, k, 1, 1, X.data(), Wt.data(), b.data(), Y.data(), scratch.data());
  conv2d_backward<double>(B, C, H, W, Cout, k, 1, 1, X.data(), Wt.data(), dY.data(), dX.data(), dW.data(), db.data(),
                          scratch.data(), false);
  std::vector<double> y1(size_t(Cout * P)), dx1(size_t(C * P)), dW1(Wt.size(), 0.0), db1(b.size(), 0.0);
  for (int64_t i = 0; i < B; ++i) {
    conv2d_forward<double>(1, C, H, W, Cout, k, 1, 1, X.data() + i * C * P, Wt.data(), b.data(), y1.data(),
                           scratch.data());
    conv2d_backward<double>(1, C, H, W, Cout, k, 1, 1, X.data() + i * C * P, Wt.data(), dY.data() + i * Cout * P,
                            dx1.data(), dW1.data(), db1.data(), scratch.data(), true);
    for (int64_t j = 0; j < Cout * P; ++j) ASSERT_NEAR(y1[size_t(j)], Y[size_t(i * Cout * P + j)], 1e-13) << i;
    for (int64_t j = 0; j < C * P; ++j) ASSERT_NEAR(dx1[size_t(j)], dX[size_t(i * C * P + j)], 1e-13) << i;
  }
  for (size_t i = 0; i < dW.size(); ++i) EXPECT_NEAR(dW[i], dW1[i], 1e-11 * (1 + std::fabs(dW1[i]))) << i;
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], db1[i], 1e-11 * (1 + std::fabs(db1[i]))) << i;
}

TEST(Dropout, MaskFromSeedAndIndexOnly) {
  const int64_t B = 32, n = 4096;  // above the element-wise threshold: OpenMP splits it
  const double p = 0.3;
  const auto X = as<float>(randv(B * n, 61, 0.5, 1.5));
  auto run = [&](int threads, uint64_t seed, bool training) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    Sequential<float> m({n}, {Dropout(p)}, B);
    m.set_seed(seed);
    m.set_training(training);
    const float* y = m.forward(X, B);
    std::vector<float> out(y, y + B * n);
    omp_set_num_threads(saved);
    return out;
  };
  const auto a1 = run(1, 5, true), a2 = run(2, 5, true), other = run(2, 6, true), eval = run(2, 5, false);
  EXPECT_TRUE(a1 == a2) << "the mask depends on the thread count";
  EXPECT_FALSE(a1 == other) << "another seed, the same mask";
  EXPECT_TRUE(eval == X) << "evaluation is the identity";
  int64_t kept = 0, same = 0;
  const float scale = 1.0f / float(1 - p);
  for (size_t i = 0; i < a1.size(); ++i) {
    if (a1[i] != 0) {
      ++kept;
      EXPECT_EQ(a1[i], X[i] * scale) << i;
    }
    same += (a1[i] != 0) == (other[i] != 0);
  }
  const double frac = double(kept) / double(B * n);
  EXPECT_NEAR(frac, 1 - p, 0.01);
  EXPECT_LT(double(same) / double(B * n), 0.65);  // independent masks agree on 0.7^2 + 0.3^2 = 58%
  // p = 0 is the identity in training too.
  Sequential<float> id({n}, {Dropout(0.0)}, B);
  const float* y = id.forward(X, B);
  EXPECT_TRUE(std::equal(X.begin(), X.end(), y));
}

TEST(Dropout, BackwardIsTheMask) {
  const int64_t B = 4, n = 50;
  const auto X = randv(B * n, 71, 0.5, 1.5), dY = randv(B * n, 72);
  for (bool training : {true, false}) {
    // Linear first so that the Dropout's dx is needed (layer 0 has none).
    Rng rng(73);
    Sequential<double> m({n}, {Linear(n, n), Dropout(0.5)}, B, rng);
    m.set_seed(9);
    m.set_training(training);
    const double* y = m.forward(X, B);
    std::vector<double> mask(y, y + B * n), lin(size_t(B * n));
    linear_forward<double>(B, n, n, X.data(), m.params(), m.params() + n * n, lin.data());
    for (size_t i = 0; i < mask.size(); ++i) mask[i] = lin[i] == 0 ? 0 : mask[i] / lin[i];
    m.zero_grad();
    m.backward(dY.data());
    // The bias gradient is the column sums of dropout's dx = dY * mask.
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t i = 0; i < B; ++i) s += dY[size_t(i * n + j)] * (training ? mask[size_t(i * n + j)] : 1.0);
      EXPECT_NEAR(m.grads()[n * n + j], s, 1e-12) << j;
    }
  }
}

TEST(Conv2dInit, BoundsLikePyTorch) {
  Rng rng(81);
  Sequential<double> m({32, 8, 8}, {Conv2d(32, 64, 3), Conv2d(64, 2, 1, 1, 0, false)}, 1, rng);
  std::vector<std::string> names;
  for (const ParamView& v : m.param_views()) names.push_back(v.name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight"}));
  EXPECT_EQ(m.param_views()[0].rows, 64);
  EXPECT_EQ(m.param_views()[0].cols, 32 * 9);
  for (const ParamView& v : m.param_views()) {
    const double bound = 1.0 / std::sqrt(v.name[0] == '0' ? 288.0 : 64.0);  // 1/sqrt(in * k * k)
    const double* p = m.params() + v.offset;
    double mn = 1e9, mx = -1e9, s = 0, s2 = 0;
    for (int64_t k = 0; k < v.size(); ++k) {
      mn = std::min(mn, p[k]), mx = std::max(mx, p[k]);
      s += p[k], s2 += p[k] * p[k];
    }
    EXPECT_GE(mn, -bound) << v.name;
    EXPECT_LT(mx, bound) << v.name;
    if (v.size() >= 10000) {
      EXPECT_LT(mn, -0.99 * bound) << v.name;
      EXPECT_GT(mx, 0.99 * bound) << v.name;
      EXPECT_NEAR(s2 / double(v.size()), bound * bound / 3, 0.05 * bound * bound / 3) << v.name;
      EXPECT_NEAR(s / double(v.size()), 0.0, 0.05 * bound) << v.name;
    }
  }
  // Drawn weight first, then bias, from the model's stream, like Linear.
  Rng a(81);
  const double bound = 1.0 / std::sqrt(288.0);
  EXPECT_EQ(m.params()[0], a.uniform(-bound, bound));
  Rng same(81), other(82);
  Sequential<double> m2({32, 8, 8}, {Conv2d(32, 64, 3), Conv2d(64, 2, 1, 1, 0, false)}, 1, same);
  Sequential<double> m3({32, 8, 8}, {Conv2d(32, 64, 3), Conv2d(64, 2, 1, 1, 0, false)}, 1, other);
  EXPECT_TRUE(std::equal(m.params(), m.params() + m.num_params(), m2.params()));
  EXPECT_FALSE(std::equal(m.params(), m.params() + m.num_params(), m3.params()));
}

TEST(ConvLayers, NamesShapesAndFlops) {
  Sequential<float> m({1, 28, 28}, {Conv2d(1, 32, 3, 1, 1), ReLU(), MaxPool2d(2), Conv2d(32, 64, 3, 2), MaxPool2d(3, 2),
                                    Flatten(), Dropout(0.25), Linear(256, 10)},
                      8);
  EXPECT_EQ(m.describe(),
            "Conv2d(1, 32, kernel_size=3, stride=1, padding=1) -> ReLU() -> MaxPool2d(kernel_size=2, stride=2) -> "
            "Conv2d(32, 64, kernel_size=3, stride=2) -> MaxPool2d(kernel_size=3, stride=2) -> Flatten() -> "
            "Dropout(p=0.25) -> Linear(256, 10)");
  EXPECT_EQ(m.shape_before(3), (Shape{32, 14, 14}));
  EXPECT_EQ(m.shape_before(4), (Shape{64, 6, 6}));
  EXPECT_EQ(m.shape_before(5), (Shape{64, 2, 2}));
  EXPECT_EQ(m.shape_before(6), Shape{256});
  EXPECT_EQ(m.layer(0).flops(8), 2.0 * 8 * 32 * 784 * 9 + 8 * 32 * 784);
  EXPECT_EQ(m.layer(2).flops(8), 8.0 * 32 * 14 * 14 * 4);
  EXPECT_EQ((Sequential<float>({3, 5, 5}, {Conv2d(3, 2, 3, 1, 0, false)}, 1).layer(0).flops(2)), 2.0 * 2 * 2 * 9 * 27);
  EXPECT_EQ(m.layer(0).name(), "Conv2d(1, 32, kernel_size=3, stride=1, padding=1)");
  EXPECT_EQ((Sequential<float>({3, 5, 5}, {Conv2d(3, 2, 3, 1, 0, false)}, 1).layer(0).name()),
            "Conv2d(3, 2, kernel_size=3, stride=1, bias=False)");
}


#define EXPECT_ERROR_HAS(call, text) \
  EXPECT_NE(error_kind_of([&] { call; }).find(text), std::string::npos) << error_kind_of([&] { call; })

TEST(ConvLayers, BadShapesNamedByLayer) {
  using S = Sequential<float>;
  EXPECT_ERROR_HAS((S({784}, {Conv2d(1, 32, 3)}, 4)),
                   "invalid_argument: Sequential: layer 0 (Conv2d(1, 32, kernel_size=3, stride=1)): expects a (C, H, W) "
                   "image input but gets (784,)");
  EXPECT_ERROR_HAS((S({64, 8, 8}, {Conv2d(32, 16, 3)}, 4)), "layer 0 (Conv2d(32, 16, kernel_size=3, stride=1)): "
                                                              "expects 32 input channels, gets 64");
  EXPECT_ERROR_HAS((S({1, 3, 3}, {Conv2d(1, 2, 5)}, 4)), "kernel 5 does not fit the padded input 3 x 3");
  EXPECT_ERROR_HAS((S({1, 3, 3}, {Conv2d(1, 2, 6, 1, 1)}, 4)), "kernel 6 does not fit the padded input 5 x 5");
  EXPECT_NO_THROW((S({1, 3, 3}, {Conv2d(1, 2, 5, 1, 1)}, 4)));
  for (const LayerSpec& bad : {Conv2d(0, 2, 3), Conv2d(1, 0, 3), Conv2d(1, 2, 0), Conv2d(1, 2, 3, 0), Conv2d(1, 2, 3, 1, -1)})
    EXPECT_ERROR_HAS((S({1, 8, 8}, {bad}, 4)),
                     "in and out channels, kernel and stride must be positive and padding not negative");
  EXPECT_ERROR_HAS((S({2, 3, 3}, {MaxPool2d(5)}, 4)),
                   "layer 0 (MaxPool2d(kernel_size=5, stride=5)): kernel 5 does not fit the input 3 x 3");
  EXPECT_ERROR_HAS((S({2, 8, 3}, {MaxPool2d(4, 1)}, 4)), "kernel 4 does not fit the input 8 x 3");
  EXPECT_ERROR_HAS((S({2, 8, 8}, {MaxPool2d(0)}, 4)), "kernel and stride must be positive");
  EXPECT_ERROR_HAS((S({2, 8, 8}, {MaxPool2d(2, -1)}, 4)), "kernel and stride must be positive");
  EXPECT_ERROR_HAS((S({2, 64}, {MaxPool2d(2)}, 4)), "expects a (C, H, W) image input but gets (2, 64)");
  EXPECT_ERROR_HAS((S({8}, {Dropout(1.0)}, 4)), "layer 0 (Dropout(p=1)): p must be in [0, 1), got 1");
  EXPECT_ERROR_HAS((S({8}, {Dropout(-0.5)}, 4)), "p must be in [0, 1), got -0.5");
  // A CNN whose Linear does not match what Flatten gives: 64 x 6 x 6 = 2304 features.
  EXPECT_ERROR_HAS((S({1, 28, 28}, {Conv2d(1, 64, 5), MaxPool2d(4), Flatten(), Linear(3136, 128)}, 4)),
                   "Sequential: layer 3 (Linear(3136, 128)): expects 3136 input features but gets 2304");
  // The kernels' own checks.
  std::vector<float> v(64);
  EXPECT_ERROR_HAS(conv2d_forward<float>(1, 1, 3, 3, 1, 5, 1, 0, v.data(), v.data(), nullptr, v.data(), v.data()),
                   "conv2d_forward: kernel 5 does not fit the padded input 3 x 3");
  EXPECT_ERROR_HAS(conv2d_forward<float>(1, 1, 4, 4, 1, 3, 1, 0, v.data(), nullptr, nullptr, v.data(), v.data()),
                   "conv2d_forward: X, Wt, Y and scratch must not be null");
  EXPECT_ERROR_HAS(conv2d_backward<float>(-1, 1, 4, 4, 1, 3, 1, 0, v.data(), v.data(), v.data(), nullptr, v.data(),
                                          nullptr, v.data()),
                   "conv2d_backward: need B >= 0");
  EXPECT_ERROR_HAS(maxpool2d_forward<float>(1, 1, 2, 2, 3, 1, v.data(), v.data(), v.data()),
                   "maxpool2d_forward: kernel 3 does not fit the input 2 x 2");
  EXPECT_ERROR_HAS(dropout_forward<float>(4, 1.5, 0, v.data(), v.data(), v.data()), "dropout_forward: need n >= 0 and p in [0, 1)");
}

}  // namespace

namespace {

// The float model (direct convolution, channels-last activations, ReLU fused into the
// convolution's store) against the same model in double (im2col GEMMs over NCHW), the same
// parameters: output and every gradient within float's rounding.
void expect_float_matches_double(const Shape& in, const std::vector<LayerSpec>& layers, int64_t B, uint64_t seed) {
  Rng rng(seed);
  Sequential<double> d(in, layers, B, rng);
  Sequential<float> f(in, layers, B);
  for (int64_t i = 0; i < d.num_params(); ++i) f.params()[i] = float(d.params()[i]);
  const auto Xd = randv(B * numel(in), seed + 1);
  const auto Xf = as<float>(Xd);
  const int64_t out = numel(d.output_shape());
  const auto Td = randv(B * out, seed + 2);
  const auto Tf = as<float>(Td);
  const double* yd = d.forward(Xd, B);
  const float* yf = f.forward(Xf, B);
  for (int64_t i = 0; i < B * out; ++i) ASSERT_NEAR(yf[i], yd[i], 2e-5 * (1 + std::fabs(yd[i]))) << "output " << i;
  d.zero_grad(), f.zero_grad();
  hddp::testing::backward_mse(d, Td.data()), hddp::testing::backward_mse(f, Tf.data());
  double scale = 0;
  for (int64_t i = 0; i < d.num_params(); ++i) scale = std::max(scale, std::fabs(d.grads()[i]));
  for (int64_t i = 0; i < d.num_params(); ++i)
    ASSERT_NEAR(f.grads()[i], d.grads()[i], 1e-4 * scale) << "gradient " << i << " of " << d.num_params();
}

// Records the input it gets, passes it through.
class Probe final : public Layer<float> {
 public:
  explicit Probe(std::vector<float>* seen) : seen_(seen) {}
  std::string name() const override { return "Probe()"; }
  Shape setup(const Shape& in) override { return n_ = numel(in), in; }
  void forward(const Forward<float>& f) const override {
    seen_->assign(f.x, f.x + f.batch * n_);
    std::copy(f.x, f.x + f.batch * n_, f.y);
  }
  void backward(const Backward<float>& b) const override {
    if (b.dx) std::copy(b.dy, b.dy + b.batch * n_, b.dx);
  }

 private:
  std::vector<float>* seen_;
  int64_t n_ = 0;
};

}  // namespace

TEST(ConvChannelsLast, TheCnnInFloatMatchesDouble) {
  expect_float_matches_double({1, 28, 28},
                              {Conv2d(1, 32, 3, 1, 1), ReLU(), MaxPool2d(2), Conv2d(32, 64, 3, 1, 1), ReLU(),
                               MaxPool2d(2), Flatten(), Linear(3136, 16), ReLU(), Linear(16, 10)},
                              5, 61);
  const Sequential<float> m({1, 28, 28}, {Conv2d(1, 8, 3, 1, 1), ReLU(), MaxPool2d(2), Flatten()}, 2);
  EXPECT_TRUE(dynamic_cast<const layers::Conv2d<float>&>(m.layer(0)).direct());
}

TEST(ConvChannelsLast, OddShapesEveryWayOut) {
  // Three input channels (NCHW in, channels last after), a convolution ending the model (NCHW
  // out), Tanh between (keeps the layout), a strided convolution (im2col, NCHW only) after a
  // direct one, overlapping and uneven pooling, a ReLU not after a convolution.
  expect_float_matches_double({3, 9, 7},
                              {Conv2d(3, 5, 3, 1, 2), Tanh(), MaxPool2d(3, 2), Conv2d(5, 17, 2, 1, 0, false), ReLU(),
                               Conv2d(17, 4, 3, 2, 1), ReLU()},
                              3, 71);
  expect_float_matches_double({2, 6, 6}, {Conv2d(2, 3, 3, 1, 1), ReLU()}, 2, 81);
  expect_float_matches_double({1, 8, 8}, {ReLU(), Conv2d(1, 20, 5, 1, 4), MaxPool2d(2), Flatten(), Linear(720, 3)}, 4,
                              91);
}

// A layer of one's own after a convolution sees PyTorch's NCHW order.
TEST(ConvChannelsLast, LayerOfOnesOwnSeesNchw) {
  std::vector<float> seen;
  Rng rng(5);
  Sequential<float> m({2, 5, 4}, {Conv2d(2, 3, 3, 1, 1), std::make_shared<Probe>(&seen), Flatten()}, 2, rng);
  const auto X = as<float>(randv(2 * 40, 6));
  const float* y = m.forward(X, 2);
  std::vector<float> want(2 * 3 * 20), scratch(size_t(conv2d_scratch_size(2, 2, 5, 4, 3, 3, 1, 1)));
  conv2d_forward<float>(2, 2, 5, 4, 3, 3, 1, 1, X.data(), m.params(), m.params() + 54, want.data(), scratch.data());
  ASSERT_EQ(seen.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(seen[i], want[i], 1e-5) << i;
    EXPECT_EQ(y[i], seen[i]) << i;
  }
}

// MaxPool2d on NHWC gives bit for bit what it gives on NCHW: values, window positions (ties to the
// first, NaN wins) and the routed gradient, for pooling that overlaps, leaves pixels out or tiles.
TEST(ConvChannelsLast, MaxPoolNhwcIsTheNchwOne) {
  struct Case {
    int64_t B, C, H, W, k, s;
  };
  for (const Case& c : {Case{2, 3, 6, 7, 2, 2}, Case{1, 70, 7, 5, 3, 1}, Case{3, 16, 9, 8, 3, 2}, Case{2, 5, 4, 4, 2, 2}}) {
    const int64_t OH = conv_out_size(c.H, c.k, c.s, 0), OW = conv_out_size(c.W, c.k, c.s, 0);
    const int64_t P = c.H * c.W, OP = OH * OW;
    auto X = as<float>(randv(c.B * c.C * P, 7));
    for (size_t i = 0; i < X.size(); i += 5) X[i] = std::round(X[i]);  // ties
    X[3] = NAN;
    const auto dY = as<float>(randv(c.B * c.C * OP, 8));
    std::vector<float> y(dY.size()), am(dY.size()), dx(X.size());
    maxpool2d_forward<float>(c.B, c.C, c.H, c.W, c.k, c.s, X.data(), y.data(), am.data());
    maxpool2d_backward<float>(c.B, c.C, c.H, c.W, c.k, c.s, am.data(), dY.data(), dx.data());
    // The same in NHWC.
    auto nhwc = [&](const std::vector<float>& v, int64_t n) {
      std::vector<float> o(v.size());
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t ch = 0; ch < c.C; ++ch)
          for (int64_t p = 0; p < n; ++p) o[size_t((b * n + p) * c.C + ch)] = v[size_t((b * c.C + ch) * n + p)];
      return o;
    };
    const auto Xh = nhwc(X, P), dYh = nhwc(dY, OP);
    std::vector<float> yh(dY.size()), dxh(X.size(), 5.0f);
    std::vector<uint8_t> amh(dY.size());
    maxpool2d_forward_nhwc<float>(c.B, c.C, c.H, c.W, c.k, c.s, Xh.data(), yh.data(), amh.data());
    maxpool2d_backward_nhwc<float>(c.B, c.C, c.H, c.W, c.k, c.s, amh.data(), dYh.data(), dxh.data());
    const auto y_want = nhwc(y, OP), am_want = nhwc(am, OP), dx_want = nhwc(dx, P);
    for (size_t i = 0; i < yh.size(); ++i) {
      ASSERT_TRUE(yh[i] == y_want[i] || (std::isnan(yh[i]) && std::isnan(y_want[i]))) << "y " << i;
      ASSERT_EQ(float(amh[i]), am_want[i]) << "argmax " << i;
    }
    for (size_t i = 0; i < dxh.size(); ++i) ASSERT_EQ(dxh[i], dx_want[i]) << "dx " << i;
  }
}
