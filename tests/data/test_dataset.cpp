// Dataset: gather of float and byte features with targets or labels, the index and kind
// checks, head(), check().
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include <hddp/data/dataset.h>
#include <hddp/kernels/check.h>

using namespace hddp;

namespace {

// 4 samples of 3 float features, 2 targets each: x = 10 * row + column, y = -(row + column / 10).
Dataset regression() {
  Dataset d;
  d.count = 4;
  d.shape = {3};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) d.x.push_back(float(10 * r + c));
  d.target_width = 2;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 2; ++c) d.y.push_back(-(float(r) + float(c) / 10));
  return d;
}

// 3 images of 1 x 2 x 2 bytes, labels 2, 0, 1.
Dataset images() {
  Dataset d;
  d.count = 3;
  d.shape = {1, 2, 2};
  d.x_bytes = std::string("\x00\x01\x02\xff" "\x10\x20\x30\x40" "\x80\x81\x82\x83", 12);
  d.labels = {2, 0, 1};
  d.num_classes = 3;
  return d;
}

std::string error_of(const Dataset& d) {
  try {
    check(d, "set");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Dataset, GatherFloatsAndTargets) {
  const Dataset d = regression();
  EXPECT_EQ(d.features(), 3);
  const int64_t idx[] = {2, 0, 2};
  std::vector<float> x(9, -1), y(6, -1);
  d.gather(idx, 3, x.data(), y.data());
  EXPECT_EQ(x, (std::vector<float>{20, 21, 22, 0, 1, 2, 20, 21, 22}));
  EXPECT_EQ(y, (std::vector<float>{d.y[4], d.y[5], d.y[0], d.y[1], d.y[4], d.y[5]}));
  std::vector<int32_t> l(3);
  EXPECT_THROW(d.gather(idx, 3, x.data(), l.data()), std::invalid_argument);  // no labels here
}

TEST(Dataset, GatherBytesScaledAndLabels) {
  Dataset d = images();
  EXPECT_EQ(d.features(), 4);
  const int64_t idx[] = {0, 2};
  std::vector<float> x(8);
  std::vector<int32_t> l(2, -1);
  d.gather(idx, 2, x.data(), l.data());
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[1], 1.0f * (1.0f / 255.0f));
  EXPECT_EQ(x[3], 255.0f * (1.0f / 255.0f));
  EXPECT_EQ(x[4], 128.0f * (1.0f / 255.0f));
  EXPECT_EQ(l, (std::vector<int32_t>{2, 1}));
  d.byte_scale = 2.0f;
  d.gather(idx + 1, 1, x.data(), l.data());
  EXPECT_EQ(x[3], 131.0f * 2.0f);
  std::vector<float> y(2);
  EXPECT_THROW(d.gather(idx, 2, x.data(), y.data()), std::invalid_argument);  // labels, not targets
}

TEST(Dataset, IndexOutsideTheSetIsRefused) {
  const Dataset d = regression();
  std::vector<float> x(6), y(4);
  for (int64_t bad : {int64_t(4), int64_t(-1)}) {
    const int64_t idx[] = {1, bad};
    try {
      d.gather(idx, 2, x.data(), y.data());
      ADD_FAILURE() << "no throw for " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("index " + std::to_string(bad) + " (row 1 of the batch) is outside [0, 4)"),
                std::string::npos) << e.what();
    }
  }
  const int64_t none[] = {0};
  d.gather(none, 0, x.data(), y.data());  // zero rows: nothing read
}

TEST(Dataset, Head) {
  const Dataset d = regression();
  const Dataset h = d.head(2);
  EXPECT_EQ(h.count, 2);
  EXPECT_EQ(h.x, std::vector<float>(d.x.begin(), d.x.begin() + 6));
  EXPECT_EQ(h.y, std::vector<float>(d.y.begin(), d.y.begin() + 4));
  EXPECT_EQ(d.head(0).count, 4);
  EXPECT_EQ(d.head(-3).count, 4);
  EXPECT_EQ(d.head(9).x, d.x);
  const Dataset i = images().head(1);
  EXPECT_EQ(i.count, 1);
  EXPECT_EQ(i.x_bytes, images().x_bytes.substr(0, 4));
  EXPECT_EQ(i.labels, (std::vector<int32_t>{2}));
  EXPECT_EQ(i.num_classes, 3);
  EXPECT_EQ(error_of(h), "");
  EXPECT_EQ(error_of(i), "");
}

TEST(Dataset, CheckNamesWhatIsInconsistent) {
  EXPECT_EQ(error_of(regression()), "");
  EXPECT_EQ(error_of(images()), "");
  EXPECT_EQ(error_of(Dataset{}), "");  // empty
  Dataset d = regression();
  d.x.pop_back();
  EXPECT_NE(error_of(d).find("set: 4 samples of shape (3,) need 12 features"), std::string::npos) << error_of(d);
  d = regression();
  d.y.push_back(1);
  EXPECT_NE(error_of(d).find("9 targets for 4 samples of 2"), std::string::npos) << error_of(d);
  d = images();
  d.labels[1] = 3;
  EXPECT_NE(error_of(d).find("label 3 of sample 1 is outside [0, 3)"), std::string::npos) << error_of(d);
  d = images();
  d.labels.pop_back();
  EXPECT_NE(error_of(d).find("2 labels for 3 samples"), std::string::npos) << error_of(d);
  d = images();
  d.x.assign(12, 0.0f);  // both floats and bytes
  EXPECT_NE(error_of(d).find("12 floats and 12 bytes"), std::string::npos) << error_of(d);
  d = regression();
  d.feature_names = {"a", "b"};
  EXPECT_NE(error_of(d).find("2 feature names for 3 features"), std::string::npos) << error_of(d);
}

}  // namespace

TEST(Dataset, SampleShapeAgainstTheModel) {
  Dataset d;
  d.count = 2, d.shape = {1, 14, 14}, d.x_bytes.assign(2 * 196, '\0');
  EXPECT_NO_THROW(check_sample_shape(d, {1, 14, 14}, "test"));
  try {
    check_sample_shape(d, {1, 28, 28}, "t10k-images");
    ADD_FAILURE() << "a 14 x 14 set passed as 28 x 28";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t10k-images: samples of shape (1, 14, 14) (196 values), but the model reads "
                                         "(1, 28, 28) (784 values)"), std::string::npos) << e.what();
  }
  // The same number of values in another layout is another shape too.
  EXPECT_THROW(check_sample_shape(d, {196}, "flat"), Error);
}

TEST(Dataset, ClassCountAgainstTheModel) {
  Dataset d;
  d.count = 3, d.shape = {1}, d.x = {0, 1, 2}, d.labels = {0, 2, 1}, d.num_classes = 3;
  EXPECT_NO_THROW(check_class_count(d, 3, "train"));
  EXPECT_NO_THROW(check_class_count(d, 4, "test"));  // a set that lacks the model's last class
  try {
    check_class_count(d, 2, "labels.csv");
    ADD_FAILURE() << "labels up to 2 passed for a model of 2 outputs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("labels.csv: labels up to 2, but the model has 2 outputs (classes 0 to 1)"),
              std::string::npos) << e.what();
  }
  Dataset r;  // regression targets
  r.count = 1, r.shape = {1}, r.x = {0}, r.target_width = 1, r.y = {0.5f};
  EXPECT_THROW(check_class_count(r, 2, "targets"), Error);
}
