// TempDir: a fresh folder for one test, removed at its end, for any test's files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace pdserve::testing {

// A fresh folder for one test, removed at its end: under the build's test-tmp, or under the
// system's temp directory where that build folder is not there (a build carried to a GPU
// machine).
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::filesystem::path test_tmp(PDSERVE_TEST_TMP);
    const std::filesystem::path root =
        std::filesystem::exists(test_tmp.parent_path())
            ? test_tmp
            : std::filesystem::temp_directory_path() / "pdserve-test";
    path_ = root / (std::string(info ? info->test_suite_name() : "t") + "." +
                    (info ? info->name() : "x") + "." + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace pdserve::testing
