// MinMaxScaler against scikit-learn's formulas (values checked by hand below), round trip,
// constant features, feature_range other than [0, 1], and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <hddp/core/scaler.h>
#include "tests/common/testing.h"

using hddp::MinMaxScaler;

namespace {

TEST(MinMaxScaler, ValuesMultiFeature) {
  // 4 rows x 3 features; feature 2 is constant.
  const std::vector<double> X = {1, -2, 5,   //
                                 3, 0, 5,    //
                                 2, 6, 5,    //
                                 5, 2, 5};
  MinMaxScaler s;  // [0, 1]
  s.fit(X.data(), 4, 3);
  EXPECT_EQ(s.data_min(), (std::vector<double>{1, -2, 5}));
  EXPECT_EQ(s.data_max(), (std::vector<double>{5, 6, 5}));
  // scale = 1 / range (constant: range 1); min = -data_min * scale.
  EXPECT_EQ(s.scale(), (std::vector<double>{0.25, 0.125, 1.0}));
  EXPECT_EQ(s.min(), (std::vector<double>{-0.25, 0.25, -5.0}));
  std::vector<double> Y(12);
  s.transform(X.data(), 4, 3, Y.data());
  const std::vector<double> want = {0, 0, 0, 0.5, 0.25, 0, 0.25, 1, 0, 1, 0.5, 0};
  EXPECT_EQ(Y, want);
  // Values outside the fitted range extrapolate (no clipping, as sklearn's default).
  const double out[3] = {9, -6, 7};
  double t[3];
  s.transform(out, 1, 3, t);
  EXPECT_EQ(t[0], 2.0);
  EXPECT_EQ(t[1], -0.5);
  EXPECT_EQ(t[2], 2.0);
}

TEST(MinMaxScaler, FeatureRangeAndRoundTrip) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = float(-3.0 + 13.0 * i / 31.0);  // linspace(-3, 10, 32)
  MinMaxScaler s(-1, 1);
  s.fit(x.data(), 32, 1);
  EXPECT_DOUBLE_EQ(s.scale()[0], 2.0 / 13.0);
  EXPECT_DOUBLE_EQ(s.min()[0], -1.0 + 3.0 * 2.0 / 13.0);
  std::vector<float> y(32), back(32);
  s.transform(x.data(), 32, 1, y.data());
  EXPECT_FLOAT_EQ(y.front(), -1.0f);
  EXPECT_FLOAT_EQ(y.back(), 1.0f);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(y[i], -1.0 + 2.0 * i / 31.0, 1e-6) << i;
  s.inverse_transform(y.data(), 32, 1, back.data());
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(back[i], x[i], 1e-5) << i;
  // In place.
  s.transform(x.data(), 32, 1, x.data());
  EXPECT_EQ(x, y);

  MinMaxScaler r(2, 7);
  const double d[] = {10, 20, 30};
  double o[3], b[3];
  r.fit(d, 3, 1);
  r.transform(d, 3, 1, o);
  EXPECT_DOUBLE_EQ(o[0], 2);
  EXPECT_DOUBLE_EQ(o[1], 4.5);
  EXPECT_DOUBLE_EQ(o[2], 7);
  r.inverse_transform(o, 3, 1, b);
  for (int i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(b[i], d[i]);
}

TEST(MinMaxScaler, ConstantFeatureDoesNotDivideByZero) {
  const double X[] = {3.5, 3.5, 3.5};
  MinMaxScaler s(-1, 1);
  s.fit(X, 3, 1);
  EXPECT_EQ(s.scale()[0], 2.0);  // (hi - lo) / 1
  double Y[3], back[3];
  s.transform(X, 3, 1, Y);
  for (double y : Y) EXPECT_EQ(y, -1.0);  // maps to lo, finite
  s.inverse_transform(Y, 3, 1, back);
  for (double b : back) EXPECT_EQ(b, 3.5);
  // A range below 10 * DBL_EPSILON counts as constant, as in sklearn.
  const double tiny[] = {1.0, 1.0 + 1e-15};
  s.fit(tiny, 2, 1);
  EXPECT_EQ(s.scale()[0], 2.0);
}

using hddp::testing_util::error_of;

TEST(MinMaxScaler, BadInput) {
  EXPECT_NE(error_of([] { MinMaxScaler(1, 1); }).find("feature_range (1, 1) needs min < max"), std::string::npos);
  EXPECT_NE(error_of([] { MinMaxScaler(2, -1); }).find("needs min < max"), std::string::npos);
  MinMaxScaler s;
  double X[4] = {1, 2, 3, 4}, Y[4];
  EXPECT_NE(error_of([&] { s.transform(X, 2, 2, Y); }).find("call fit() first"), std::string::npos);
  EXPECT_NE(error_of([&] { s.fit(X, 0, 2); }).find("at least one row"), std::string::npos);
  X[3] = std::nan("");
  EXPECT_NE(error_of([&] { s.fit(X, 2, 2); }).find("X[1, 1] = nan is not finite"), std::string::npos)
      << error_of([&] { s.fit(X, 2, 2); });
  EXPECT_FALSE(s.fitted());  // a refused fit leaves it unfitted
  X[3] = 4;
  s.fit(X, 2, 2);
  EXPECT_NE(error_of([&] { s.transform(X, 4, 1, Y); }).find("fitted on 2 features, got 1"), std::string::npos);
  EXPECT_NE(error_of([&] { s.inverse_transform(X, 1, 4, Y); }).find("fitted on 2 features, got 4"), std::string::npos);
}

}  // namespace
