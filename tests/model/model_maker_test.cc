// Model directories written with random weights: the presets' shapes, and the architectures
// `pdserve make-model --architecture` puts on them, load and run.
#include "model/model_maker.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/cpu_backend.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using testing::Iota;
using testing::RandomTokens;
using testing::TempDir;

// Writes `preset` (as `architecture`, when given) and loads it back.
ModelConfig MakeAndLoad(const TempDir& dir, const std::string& preset,
                        const std::string& architecture = "") {
  MakeModelOptions o;
  o.preset = preset;
  o.architecture = architecture;
  o.out_dir = dir.path();
  o.dtype = DType::kBF16;
  Status made = MakeModel(o);
  EXPECT_TRUE(made.ok()) << made.ToString();
  auto c = ModelConfig::Load(dir.path());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : ModelConfig{};
}

TEST(ModelMakerTest, Qwen3TinyIsASmallQwen3DenseModelThatRuns) {
  TempDir dir;
  const ModelConfig c = MakeAndLoad(dir, "qwen3-tiny");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_NE(c.head_dim * c.n_heads, c.dim);  // heads wider than hidden_size / heads
  const auto config = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  EXPECT_EQ(config["model_type"], "qwen3");

  auto weights = Weights::Load(dir.path(), c);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  EXPECT_EQ((*weights)->layers[0].q_norm.size(), 64u);
  EXPECT_EQ((*weights)->lm_head.data, (*weights)->embed.data);
  auto backend = CreateCpuBackend(*weights, c, {16, 16, 2});
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  const auto tokens = RandomTokens(20, c.vocab_size, 3);
  const auto pages = Iota(2);
  ForwardBatch batch;
  batch.chunks.push_back({tokens, 0, pages, true});
  std::vector<float> logits;
  ASSERT_TRUE((*backend)->Forward(batch, &logits).ok());
  ASSERT_EQ(logits.size(), static_cast<size_t>(c.vocab_size));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
}

TEST(ModelMakerTest, ArchitectureOptionAddsOrDropsTheQkNorms) {
  TempDir qwen3, llama;
  const ModelConfig a = MakeAndLoad(qwen3, "tiny", "Qwen3ForCausalLM");
  EXPECT_TRUE(a.qk_norm);
  EXPECT_EQ(a.head_dim, 32);  // the preset's shape
  EXPECT_TRUE(Weights::Load(qwen3.path(), a).ok());

  const ModelConfig b = MakeAndLoad(llama, "qwen3-tiny", "LlamaForCausalLM");
  EXPECT_FALSE(b.qk_norm);
  EXPECT_EQ(b.head_dim, 64);
  auto file = SafetensorsFile::Open(llama / "model.safetensors");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ((*file)->Find("model.layers.0.self_attn.q_norm.weight"), nullptr);
  EXPECT_TRUE(Weights::Load(llama.path(), b).ok());

  TempDir bad;
  MakeModelOptions o;
  o.out_dir = bad.path();
  o.architecture = "Qwen3MoeForCausalLM";
  EXPECT_EQ(MakeModel(o).code(), StatusCode::kInvalidArgument);
}

TEST(ModelMakerTest, EveryPresetHasAShape) {
  for (const std::string& preset : PresetNames()) {
    auto c = PresetConfig(preset);
    ASSERT_TRUE(c.ok()) << preset;
    EXPECT_GT(c->head_dim, 0) << preset;
    EXPECT_EQ(c->n_heads % c->n_kv_heads, 0) << preset;
  }
  auto qwen = PresetConfig("qwen3-0.6b");  // Qwen3-0.6B's shape
  ASSERT_TRUE(qwen.ok());
  EXPECT_EQ(qwen->dim, 1024);
  EXPECT_EQ(qwen->n_layers, 28);
  EXPECT_EQ(qwen->n_heads, 16);
  EXPECT_EQ(qwen->n_kv_heads, 8);
  EXPECT_EQ(qwen->head_dim, 128);
  EXPECT_EQ(qwen->vocab_size, 151936);
  EXPECT_TRUE(qwen->qk_norm);
  EXPECT_EQ(PresetConfig("huge").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdserve::model
