// Loading model directories: sharded and single files, and the clear errors for broken ones.
#include "model/weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

// A Qwen3 config: per-head q and k norms, heads wider than hidden_size / num_attention_heads.
ModelConfig Qwen3Config() {
  ModelConfig c = SmallConfig();
  c.architecture = "Qwen3ForCausalLM";
  c.qk_norm = true;
  c.head_dim = 32;
  return c;
}

TEST(WeightsTest, Qwen3LoadsEveryLayersQAndKNorms) {
  const ModelConfig c = Qwen3Config();
  TempDir dir;
  WriteModel(c, dir.path(), 5, DType::kBF16);
  auto w = Weights::Load(dir.path(), c);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  auto file = SafetensorsFile::Open(dir / "model.safetensors");
  ASSERT_TRUE(file.ok());
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& layer = (*w)->layers[l];
    ASSERT_EQ(layer.q_norm.size(), static_cast<size_t>(c.head_dim));
    ASSERT_EQ(layer.k_norm.size(), static_cast<size_t>(c.head_dim));
    const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
    const TensorView* k_norm = (*file)->Find(p + "k_norm.weight");
    ASSERT_NE(k_norm, nullptr);
    std::vector<float> want(c.head_dim);
    ConvertToFloat(k_norm->dtype, k_norm->data, want.data(), want.size());
    EXPECT_EQ(layer.k_norm, want) << "layer " << l;
    EXPECT_NE(layer.q_norm, layer.k_norm);
    EXPECT_EQ(layer.wq.rows, c.q_dim());  // 4 heads of 32 over a hidden size of 64
    EXPECT_EQ(layer.wo.cols, c.q_dim());
  }
  // Llama's layers have none.
  TempDir llama;
  WriteModel(SmallConfig(), llama.path());
  auto plain = Weights::Load(llama.path(), SmallConfig());
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE((*plain)->layers[0].q_norm.empty());
}

TEST(WeightsTest, AMissingQkNormNamesTheTensor) {
  ModelConfig c = Qwen3Config();
  c.qk_norm = false;  // written without the norms
  TempDir dir;
  WriteModel(c, dir.path());
  c.qk_norm = true;
  auto w = Weights::Load(dir.path(), c);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kNotFound);
  EXPECT_NE(w.status().message().find("missing tensor 'model.layers.0.self_attn.q_norm.weight'"),
            std::string::npos)
      << w.status().message();
}

// Llama's (and Qwen3's) attention_bias gives o_proj a bias too, which the engine does not add:
// refused by name rather than left out of the maths.
TEST(WeightsTest, AnOutputProjectionBiasIsRefusedByName) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path(), 5, DType::kF32, 2);
  TensorToWrite bias{"model.layers.1.self_attn.o_proj.bias", DType::kF32, {c.dim}, {}};
  bias.bytes.resize(c.dim * sizeof(float));
  ASSERT_TRUE(WriteSafetensors(dir / "extra.safetensors", {&bias}).ok());
  const std::string index_path = dir / "model.safetensors.index.json";
  nlohmann::json index = nlohmann::json::parse(std::ifstream(index_path));
  index["weight_map"][bias.name] = "extra.safetensors";
  std::ofstream(index_path) << index.dump();
  auto w = Weights::Load(dir.path(), c);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(w.status().message().find(
                "extra.safetensors: tensor 'model.layers.1.self_attn.o_proj.bias': an output "
                "projection bias is not supported"),
            std::string::npos)
      << w.status().message();
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

}  // namespace
}  // namespace pdserve::model
