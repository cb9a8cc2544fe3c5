#pragma once
// Helpers several GoogleTest suites share (header-only).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace hddp::testing_util {

// The message of the std::invalid_argument f() throws, or "no std::invalid_argument".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no std::invalid_argument";
}

// What f() throws, with its kind: "invalid_argument: <message>", "other: <message>" (any other
// std::exception), or "no exception".
template <class F>
std::string error_kind_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return std::string("invalid_argument: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "no exception";
}

// A file's bytes, and a file made of bytes (replaced).
inline std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
inline void spit(const std::string& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// A fixture with a fresh folder per test, in the working directory (ctest runs tests in the
// build tree), removed afterwards: <suite>_tmp_<pid>.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    dir_ = std::filesystem::current_path() / (std::string(suite) + "_tmp_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

}  // namespace hddp::testing_util
