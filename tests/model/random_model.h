// Test helper: writes a model directory with random weights for an arbitrary ModelConfig into
// a fresh folder under the build's test-tmp, and removes it at the end of the test.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model/model_config.h"
#include "model/model_maker.h"
#include "tests/temp_dir.h"

namespace pdserve::model::testing {

using ::pdserve::testing::TempDir;

// n random token ids below `vocab`, the same for the same seed.
inline std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// from, from + 1, ..., from + n - 1 (block tables of consecutive pages).
inline std::vector<int32_t> Iota(int n, int from = 0) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), from);
  return v;
}

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
