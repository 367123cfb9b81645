// Test helper: writes a model directory with random weights for an arbitrary ModelConfig into
// a fresh folder under the build's test-tmp, and removes it at the end of the test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/model_config.h"
#include "model/model_maker.h"

namespace pdserve::model::testing {

class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(PDSERVE_TEST_TMP) /
            (std::string(info ? info->test_suite_name() : "t") + "." + (info ? info->name() : "x") +
             "." + std::to_string(::getpid()));
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

// A small Llama config; tests change fields before writing.
inline ModelConfig SmallConfig() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.vocab_size = 96;
  c.dim = 64;
  c.hidden_dim = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 16;
  c.max_seq_len = 256;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0;
  return c;
}

inline void WriteModel(const ModelConfig& c, const std::string& dir, uint64_t seed = 7,
                       DType dtype = DType::kF32, int shards = 1) {
  std::ofstream(dir + "/config.json") << c.ToJson().dump(2);
  Status s = WriteRandomWeights(c, dir, seed, dtype, shards);
  ASSERT_TRUE(s.ok()) << s.ToString();
}

}  // namespace pdserve::model::testing
