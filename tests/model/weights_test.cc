// Loading model directories: sharded and single files, and the clear errors for broken ones.
#include "model/weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "model/safetensors.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using testing::SmallConfig;
using testing::TempDir;
using testing::WriteModel;

TEST(WeightsTest, ShardedAndSingleFileGiveTheSameTensors) {
  const ModelConfig c = SmallConfig();
  TempDir one, three;
  WriteModel(c, one.path(), 5, DType::kBF16, 1);
  WriteModel(c, three.path(), 5, DType::kBF16, 3);
  ASSERT_TRUE(std::filesystem::exists(three / "model.safetensors.index.json"));
  auto a = Weights::Load(one.path(), c);
  auto b = Weights::Load(three.path(), c);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->files.size(), 3u);
  const Matrix& wa = (*a)->layers[1].w_down;
  const Matrix& wb = (*b)->layers[1].w_down;
  EXPECT_EQ(wa.dtype, DType::kBF16);
  EXPECT_EQ(0, std::memcmp(wa.data, wb.data, wa.bytes()));
  EXPECT_EQ((*a)->final_norm, (*b)->final_norm);
  EXPECT_EQ((*a)->MatrixBytesPerToken(),
            2u * (c.n_layers *
                      (2 * c.q_dim() * c.dim + 2 * c.kv_dim() * c.dim + 3 * c.dim * c.hidden_dim) +
                  c.vocab_size * c.dim));
}

TEST(WeightsTest, TiedEmbeddingsNeedNoLmHead) {
  ModelConfig c = SmallConfig();
  c.tie_word_embeddings = true;
  TempDir dir;
  WriteModel(c, dir.path());
  auto w = Weights::Load(dir.path(), c);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)->lm_head.data, (*w)->embed.data);
}

TEST(WeightsTest, ConvertedToRoundsEveryMatrixAndKeepsTheVectors) {
  ModelConfig c = SmallConfig();
  c.tie_word_embeddings = true;
  TempDir dir;
  WriteModel(c, dir.path(), 3, DType::kF32);
  auto loaded = Weights::Load(dir.path(), c);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const auto& f32 = *loaded;
  const auto bf16 = Weights::ConvertedTo(f32, DType::kBF16);
  auto expect_rounded = [](const Matrix& from, const Matrix& to) {
    ASSERT_EQ(to.dtype, DType::kBF16);
    ASSERT_EQ(to.rows, from.rows);
    ASSERT_EQ(to.cols, from.cols);
    const auto* in = static_cast<const float*>(from.data);
    const auto* out = static_cast<const uint16_t*>(to.data);
    for (size_t i = 0; i < static_cast<size_t>(from.rows) * from.cols; ++i)
      ASSERT_EQ(out[i], FloatToBF16(in[i])) << i;
  };
  expect_rounded(f32->embed, bf16->embed);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights &a = f32->layers[l], &b = bf16->layers[l];
    expect_rounded(a.wq, b.wq);
    expect_rounded(a.wk, b.wk);
    expect_rounded(a.wv, b.wv);
    expect_rounded(a.wo, b.wo);
    expect_rounded(a.w_gate, b.w_gate);
    expect_rounded(a.w_up, b.w_up);
    expect_rounded(a.w_down, b.w_down);
    EXPECT_EQ(a.attn_norm, b.attn_norm);  // vectors stay f32
    EXPECT_EQ(a.mlp_norm, b.mlp_norm);
  }
  EXPECT_EQ(bf16->lm_head.data, bf16->embed.data);  // still tied: converted once
  EXPECT_EQ(bf16->MatrixBytesPerToken() * 2, f32->MatrixBytesPerToken());

  // Back to f32 is exact; converting to the file's own dtype keeps the mapped views.
  const auto back = Weights::ConvertedTo(bf16, DType::kF32);
  for (int i = 0; i < c.dim; ++i) {
    EXPECT_EQ(static_cast<const float*>(back->layers[0].wq.data)[i],
              BF16ToFloat(static_cast<const uint16_t*>(bf16->layers[0].wq.data)[i]));
  }
  EXPECT_EQ(Weights::ConvertedTo(f32, DType::kF32)->layers[0].wq.data, f32->layers[0].wq.data);
}

TEST(WeightsTest, InHugePagesCopiesFileViewsOnceAndKeepsConvertedMatrices) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    ModelConfig c = SmallConfig();
    c.tie_word_embeddings = tied;
    TempDir dir;
    WriteModel(c, dir.path());
    auto loaded = Weights::Load(dir.path(), c);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    const auto& mapped = *loaded;
    const auto copied = Weights::InHugePages(mapped);
    auto expect_copy = [](const Matrix& from, const Matrix& to) {
      EXPECT_NE(to.data, from.data);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(to.data) % 4096, 0u);  // page-aligned in the arena
      ASSERT_EQ(to.dtype, from.dtype);
      ASSERT_EQ(to.bytes(), from.bytes());
      EXPECT_EQ(std::memcmp(to.data, from.data, from.bytes()), 0);
    };
    expect_copy(mapped->embed, copied->embed);
    expect_copy(mapped->lm_head, copied->lm_head);
    // A tied LM head stays the embedding, copied once.
    EXPECT_EQ(copied->lm_head.data == copied->embed.data, c.tie_word_embeddings);
    // Every matrix counted once: the embedding is the LM head when tied.
    EXPECT_EQ(mapped->MatrixBytes(),
              mapped->MatrixBytesPerToken() + (tied ? 0 : mapped->embed.bytes()));
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerWeights &a = mapped->layers[l], &b = copied->layers[l];
      for (auto m : {&LayerWeights::wq, &LayerWeights::wk, &LayerWeights::wv, &LayerWeights::wo,
                     &LayerWeights::w_gate, &LayerWeights::w_up, &LayerWeights::w_down}) {
        expect_copy(a.*m, b.*m);
      }
    }
    // Matrices already copied or converted are not copied again.
    const auto again = Weights::InHugePages(copied);
    EXPECT_EQ(again->layers[0].w_down.data, copied->layers[0].w_down.data);
    EXPECT_EQ(again->embed.data, copied->embed.data);
    const auto bf16 = Weights::ConvertedTo(mapped, DType::kBF16);
    EXPECT_EQ(Weights::InHugePages(bf16)->layers[0].wq.data, bf16->layers[0].wq.data);
  }
}

TEST(WeightsTest, MissingTensorNamesFileAndTensor) {
  ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  c.attention_bias = true;  // the files have no biases
  auto w = Weights::Load(dir.path(), c);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("model.safetensors"), std::string::npos)
      << w.status().message();
  EXPECT_NE(w.status().message().find("model.layers.0.self_attn.q_proj.bias"), std::string::npos);
}

TEST(WeightsTest, WrongShapeNamesTensorAndBothShapes) {
  ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  c.hidden_dim = 100;
  auto w = Weights::Load(dir.path(), c);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find(
                "model.layers.0.mlp.gate_proj.weight' has shape [96, 64], expected [100, 64]"),
            std::string::npos)
      << w.status().message();
}

TEST(WeightsTest, TruncatedFileIsRefusedNamingTheTensorPastTheEnd) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  const std::string file = dir / "model.safetensors";
  std::filesystem::resize_file(file, std::filesystem::file_size(file) - 1000);
  auto w = Weights::Load(dir.path(), c);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(w.status().message().find(file), std::string::npos) << w.status().message();
  EXPECT_NE(w.status().message().find("truncated"), std::string::npos);
  EXPECT_NE(w.status().message().find("tensor '"), std::string::npos);
}

TEST(WeightsTest, GarbageHeaderAndMissingFilesAreClearErrors) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  auto none = Weights::Load(dir.path(), c);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("no model.safetensors"), std::string::npos);
  std::ofstream(dir / "model.safetensors") << "\x10\x00\x00\x00\x00\x00\x00\x00{not json at all";
  auto bad = Weights::Load(dir.path(), c);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss) << bad.status().ToString();
  std::ofstream(dir / "model.safetensors") << "\xff\xff\xff\x7f\x00\x00\x00\x00{}";
  auto huge = Weights::Load(dir.path(), c);
  EXPECT_EQ(huge.status().code(), StatusCode::kDataLoss) << huge.status().ToString();
}

// A safetensors file holding `header` (JSON text) and `data_bytes` zero bytes.
void WriteSafetensorsText(const std::string& path, const std::string& header, size_t data_bytes) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + std::string(data_bytes, '\0');
  std::ofstream(path, std::ios::binary) << bytes;
}

// `depth` arrays nested around 1, as JSON text (too deep for nlohmann's dump() to write).
std::string NestedJson(int depth) {
  return std::string(depth, '[') + "1" + std::string(depth, ']');
}

TEST(WeightsTest, HeadersThatOverflowOrNestDeeplyAreClearErrors) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  const std::string file = dir / "model.safetensors";
  // 2^32 x 2^32 elements: the product overflows int64 (and wrapped to 0 bytes, matching the
  // empty data_offsets, before it was checked).
  WriteSafetensorsText(
      file, R"({"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  auto overflow = SafetensorsFile::Open(file);
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("holds more elements than any file can"),
            std::string::npos)
      << overflow.status().message();
  WriteSafetensorsText(
      file, R"({"x":{"dtype":)" + NestedJson(100000) + R"(,"shape":[1],"data_offsets":[0,4]}})", 4);
  auto dtype = SafetensorsFile::Open(file);
  EXPECT_EQ(dtype.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(dtype.status().message().find("dtype an array of 1"), std::string::npos)
      << dtype.status().message();
  WriteSafetensorsText(
      file, R"({"x":{"dtype":"F32","shape":[)" + NestedJson(100000) + R"(],"data_offsets":[0,4]}})",
      4);
  auto dim = SafetensorsFile::Open(file);
  EXPECT_NE(dim.status().message().find("bad dimension an array of 1"), std::string::npos)
      << dim.status().message();
}

// ParseTensors checks bytes already in memory (the fuzz target's way in) as Open checks a file,
// and its views point into those bytes.
TEST(WeightsTest, ParseTensorsChecksBytesInMemoryAsOpenChecksAFile) {
  const std::string header =
      R"({"__metadata__":{},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header + std::string(8, '\x01');
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  auto tensors = SafetensorsFile::ParseTensors(data, bytes.size(), "inline");
  ASSERT_TRUE(tensors.ok()) << tensors.status().ToString();
  ASSERT_EQ(tensors->size(), 1u);
  EXPECT_EQ(tensors->at("a").data, data + 8 + header.size());
  EXPECT_EQ(tensors->at("a").bytes(), 8u);
  auto truncated = SafetensorsFile::ParseTensors(data, bytes.size() - 1, "inline");
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss) << truncated.status().ToString();
  EXPECT_NE(truncated.status().message().find("inline: tensor 'a'"), std::string::npos)
      << truncated.status().ToString();
  auto tiny = SafetensorsFile::ParseTensors(data, 7, "inline");
  EXPECT_EQ(tiny.status().code(), StatusCode::kDataLoss);
}

// Found by tests/fuzz/model_config_fuzz.cc (its seed crash-a27d6e84...): more attention heads
// than hidden_size, without head_dim, loaded with head_dim 0.
TEST(ModelConfigTest, HeadsThatDoNotSplitHiddenSizeNeedAHeadDim) {
  nlohmann::json j = SmallConfig().ToJson();
  j.erase("head_dim");
  j["hidden_size"] = 4096;
  j["num_attention_heads"] = j["num_key_value_heads"] = 32000;
  auto zero = ModelConfig::FromJson(j, "config.json");
  EXPECT_EQ(zero.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.status().message().find("must be a multiple of num_attention_heads (32000)"),
            std::string::npos)
      << zero.status().ToString();
  j["num_attention_heads"] = j["num_key_value_heads"] = 3;  // 4096 / 3 is not whole
  EXPECT_EQ(ModelConfig::FromJson(j, "config.json").status().code(), StatusCode::kInvalidArgument);
  j["head_dim"] = 128;  // given: any split is the model's own
  auto given = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(given.ok()) << given.status().ToString();
  EXPECT_EQ(given->head_dim, 128);
}

// Hugging Face's LlamaConfig (and Mistral's, Qwen2's) default: a config.json without the field
// means 1e-6, not the 1e-5 some checkpoints write out.
TEST(ModelConfigTest, AMissingRmsNormEpsIsHuggingFacesDefault) {
  nlohmann::json j = SmallConfig().ToJson();
  j.erase("rms_norm_eps");
  auto c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  j["rms_norm_eps"] = 1e-5;
  EXPECT_FLOAT_EQ(ModelConfig::FromJson(j, "config.json")->rms_norm_eps, 1e-5f);
}

TEST(ModelConfigTest, FieldsOfAnotherTypeOrPastAnyModelAreClearErrors) {
  const nlohmann::json good = SmallConfig().ToJson();
  nlohmann::json j = good;
  j["_name_or_path"] = 5;  // informational: ignored
  EXPECT_TRUE(ModelConfig::FromJson(j, "config.json").ok());
  j = good;
  j["rope_scaling"] = {{"rope_type", 5}};
  auto rope = ModelConfig::FromJson(j, "config.json");
  EXPECT_NE(rope.status().message().find("rope_scaling's type must be a string, got 5"),
            std::string::npos)
      << rope.status().message();
  j = good;
  j["num_hidden_layers"] = 1 << 30;  // once: 309 GB of empty layers, then bad_alloc
  auto layers = ModelConfig::FromJson(j, "config.json");
  EXPECT_NE(layers.status().message().find("num_hidden_layers = 1073741824 is past any model's"),
            std::string::npos)
      << layers.status().message();
  j = good;
  j["num_attention_heads"] = j["num_key_value_heads"] = 1 << 30;  // q_dim overflowed int
  EXPECT_EQ(ModelConfig::FromJson(j, "config.json").status().code(), StatusCode::kInvalidArgument);
  j = good;
  j["head_dim"] = 1 << 14;
  j["num_attention_heads"] = j["num_key_value_heads"] = 1 << 14;  // each alone in range
  auto q = ModelConfig::FromJson(j, "config.json");
  EXPECT_NE(q.status().message().find("num_attention_heads x head_dim"), std::string::npos)
      << q.status().message();
  TempDir dir;
  j = good;
  j.erase("hidden_size");
  std::string text = j.dump();
  text.insert(text.size() - 1, R"(,"hidden_size":)" + NestedJson(100000));
  std::ofstream(dir / "config.json") << text;
  auto deep = ModelConfig::Load(dir.path());
  EXPECT_NE(deep.status().message().find("'hidden_size' must be a positive integer, got an "
                                         "array of 1"),
            std::string::npos)
      << deep.status().message();
}

TEST(ModelConfigTest, UnknownArchitectureAndBadFieldsAreClearErrors) {
  TempDir dir;
  std::ofstream(dir / "config.json")
      << R"({"architectures": ["GPT2LMHeadModel"], "vocab_size": 10})";
  auto c = ModelConfig::Load(dir.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(c.status().message().find("config.json: unknown architecture 'GPT2LMHeadModel'"),
            std::string::npos)
      << c.status().message();

  nlohmann::json j = SmallConfig().ToJson();
  j["num_key_value_heads"] = 3;
  std::ofstream(dir / "config.json") << j.dump();
  EXPECT_EQ(ModelConfig::Load(dir.path()).status().code(), StatusCode::kInvalidArgument);
  j = SmallConfig().ToJson();
  j["hidden_size"] = "big";
  std::ofstream(dir / "config.json") << j.dump();
  auto s = ModelConfig::Load(dir.path());
  EXPECT_NE(s.status().message().find("'hidden_size' must be a positive integer"),
            std::string::npos);
  std::ofstream(dir / "config.json") << "{";
  EXPECT_EQ(ModelConfig::Load(dir.path()).status().code(), StatusCode::kInvalidArgument);
}

TEST(ModelConfigTest, ReadsLlama3RopeScalingQwenBiasAndEosLists) {
  nlohmann::json j = SmallConfig().ToJson();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  j["eos_token_id"] = {128001, 128009};
  j["architectures"] = {"Qwen2ForCausalLM"};
  j.erase("attention_bias");
  auto c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->rope_scaling->type, "llama3");
  EXPECT_EQ(c->rope_scaling->factor, 8.0);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int>{128001, 128009}));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_EQ(ModelConfig::FromJson(j, "config.json").status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace pdserve::model
