// The CPU backend against a plain double-precision forward written here (it shares no code with
// the engine), and the batch-invariance properties the serving setups rely on.
#include "model/cpu_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model/safetensors.h"
#include "model/weights.h"
#include "tests/model/random_model.h"
#include "tests/model/reference_llama.h"

namespace pdserve::model {
namespace {

using testing::Iota;
using testing::LoadRef;
using testing::RandomTokens;
using testing::RefForward;
using testing::RefModel;

using testing::SmallConfig;
using testing::TempDir;
using testing::WriteModel;

// ---- Fixtures ----
struct Loaded {
  std::unique_ptr<Backend> backend;
};

std::unique_ptr<Backend> MakeBackend(const ModelConfig& c, const std::string& dir, int pages = 64,
                                     int page_size = 4, int threads = 2) {
  auto weights = Weights::Load(dir, c);
  EXPECT_TRUE(weights.ok()) << weights.status().ToString();
  auto backend = CreateCpuBackend(*weights, c, {pages, page_size, threads});
  EXPECT_TRUE(backend.ok());
  return std::move(backend).value();
}

double RelativeError(const std::vector<float>& got, const std::vector<double>& want) {
  double max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
    max_ref = std::max(max_ref, std::abs(want[i]));
  }
  return max_diff / max_ref;
}

void ExpectMatchesReference(const ModelConfig& c) {
  TempDir dir;
  WriteModel(c, dir.path());
  const RefModel ref = LoadRef(c, dir.path());
  auto backend = MakeBackend(c, dir.path());
  const auto tokens = RandomTokens(23, c.vocab_size, 11);
  const auto pages = Iota(8);
  ForwardBatch batch;
  batch.chunks.push_back({tokens, 0, pages, true});
  batch.all_logits = true;
  std::vector<float> logits;
  ASSERT_TRUE(backend->Forward(batch, &logits).ok());
  const auto want = RefForward(ref, tokens);
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<float> row(logits.begin() + i * c.vocab_size,
                           logits.begin() + (i + 1) * c.vocab_size);
    EXPECT_LT(RelativeError(row, want[i]), 1e-4) << "position " << i;
  }
}

TEST(CpuBackendTest, LlamaWithGroupedQueryAttentionMatchesDoubleReference) {
  ExpectMatchesReference(SmallConfig());
}

TEST(CpuBackendTest, Qwen2WithBiasesAndTiedEmbeddingsMatchesDoubleReference) {
  ModelConfig c = SmallConfig();
  c.architecture = "Qwen2ForCausalLM";
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  c.n_kv_heads = 1;
  ExpectMatchesReference(c);
}

// Qwen3 dense: q and k normalised per head before RoPE, heads wider than dim / n_heads (as
// Qwen3-0.6B's: 1024 / 16 = 64, head_dim 128), tied embeddings.
TEST(CpuBackendTest, Qwen3WithQkNormMatchesDoubleReference) {
  ModelConfig c = SmallConfig();
  c.architecture = "Qwen3ForCausalLM";
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.head_dim = 32;  // dim 64 over 4 heads would be 16
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 1000000.0;
  ExpectMatchesReference(c);
}

// Qwen3 with attention_bias: the norms come after the biases.
TEST(CpuBackendTest, Qwen3NormsTheBiasedQueriesAndKeys) {
  ModelConfig c = SmallConfig();
  c.architecture = "Qwen3ForCausalLM";
  c.qk_norm = true;
  c.attention_bias = true;
  c.n_kv_heads = 1;
  ExpectMatchesReference(c);
}

TEST(CpuBackendTest, Llama3RopeScalingAndOddSizesMatchDoubleReference) {
  ModelConfig c = SmallConfig();
  c.rope_scaling = RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
  c.rope_theta = 500000;
  c.dim = 52;  // not a multiple of 8: exercises the kernels' tails
  c.head_dim = 14;
  c.hidden_dim = 70;
  ExpectMatchesReference(c);
}

TEST(CpuBackendTest, PrefillThenDecodeEqualsOneForwardOverAllTokens) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  auto backend = MakeBackend(c, dir.path());
  const auto tokens = RandomTokens(18, c.vocab_size, 3);
  const auto pages = Iota(5);
  const std::span<const int32_t> all(tokens);

  std::vector<float> whole, prefill, decode;
  ForwardBatch one;
  one.chunks.push_back({all, 0, pages, true});
  ASSERT_TRUE(backend->Forward(one, &whole).ok());

  ForwardBatch first;
  first.chunks.push_back({all.first(17), 0, pages, true});
  ASSERT_TRUE(backend->Forward(first, &prefill).ok());
  ForwardBatch step;
  step.chunks.push_back({all.subspan(17, 1), 17, pages, true});
  ASSERT_TRUE(backend->Forward(step, &decode).ok());
  EXPECT_EQ(decode, whole);  // bit for bit: batch invariance
}

TEST(CpuBackendTest, ScatteredPagesGiveTheSameLogitsAsContiguousPages) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  auto backend = MakeBackend(c, dir.path());
  const auto tokens = RandomTokens(30, c.vocab_size, 5);
  const std::vector<int32_t> contiguous = Iota(8);
  const std::vector<int32_t> scattered = {41, 9, 63, 17, 30, 12, 55, 48};
  std::vector<float> a, b;
  ForwardBatch ba, bb;
  ba.all_logits = bb.all_logits = true;
  ba.chunks.push_back({tokens, 0, contiguous, true});
  bb.chunks.push_back({tokens, 0, scattered, true});
  ASSERT_TRUE(backend->Forward(ba, &a).ok());
  ASSERT_TRUE(backend->Forward(bb, &b).ok());
  EXPECT_EQ(a, b);
}

TEST(CpuBackendTest, MixedBatchGivesEachSequenceItsLogitsAlone) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  auto backend = MakeBackend(c, dir.path(), /*pages=*/256);
  // Three prompts of different lengths and three decoding sequences (prefilled first). Together
  // they are 81 rows: more than the CPU backend normalises inside its products, which each of
  // them alone is not, so the two ways of normalising must agree too.
  struct Seq {
    std::vector<int32_t> tokens;
    std::vector<int32_t> pages;
    int start;
  };
  std::vector<Seq> seqs;
  for (int i = 0; i < 6; ++i) {
    Seq s{RandomTokens(5 + 21 * i, c.vocab_size, 100 + i), Iota(40, i * 40), 0};
    s.start = i < 3 ? 0 : static_cast<int>(s.tokens.size()) - 1;
    seqs.push_back(std::move(s));
  }
  std::vector<float> scratch;
  for (int i = 3; i < 6; ++i) {  // the decoding ones already have their prompt's KV
    ForwardBatch b;
    b.chunks.push_back({std::span(seqs[i].tokens).first(seqs[i].start), 0, seqs[i].pages, true});
    ASSERT_TRUE(backend->Forward(b, &scratch).ok());
  }
  std::vector<std::vector<float>> alone(6);
  for (int i = 0; i < 6; ++i) {
    ForwardBatch b;
    b.chunks.push_back(
        {std::span(seqs[i].tokens).subspan(seqs[i].start), seqs[i].start, seqs[i].pages, true});
    ASSERT_TRUE(backend->Forward(b, &alone[i]).ok());
  }
  ForwardBatch mixed;
  for (int i : {4, 0, 3, 2, 5, 1}) {
    mixed.chunks.push_back(
        {std::span(seqs[i].tokens).subspan(seqs[i].start), seqs[i].start, seqs[i].pages, true});
  }
  std::vector<float> together;
  ASSERT_TRUE(backend->Forward(mixed, &together).ok());
  int row = 0;
  for (int i : {4, 0, 3, 2, 5, 1}) {
    std::vector<float> got(together.begin() + row * c.vocab_size,
                           together.begin() + (row + 1) * c.vocab_size);
    EXPECT_EQ(got, alone[i]) << "sequence " << i;
    ++row;
  }
}

TEST(CpuBackendTest, ThreadCountDoesNotChangeLogits) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  const auto tokens = RandomTokens(12, c.vocab_size, 9);
  const auto pages = Iota(3);
  std::vector<float> one, two;
  for (auto [threads, out] : {std::pair{1, &one}, std::pair{2, &two}}) {
    auto backend = MakeBackend(c, dir.path(), 8, 4, threads);
    ForwardBatch b;
    b.chunks.push_back({tokens, 0, pages, true});
    ASSERT_TRUE(backend->Forward(b, out).ok());
  }
  EXPECT_EQ(one, two);
}

TEST(CpuBackendTest, ServingFromTheFileMapsGivesTheSameLogitsAsTheHugePageCopy) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  auto weights = Weights::Load(dir.path(), c);
  ASSERT_TRUE(weights.ok()) << weights.status().ToString();
  const auto tokens = RandomTokens(12, c.vocab_size, 9);
  const auto pages = Iota(3);
  std::vector<float> copied, mapped;
  // 1 byte available: the copy would not fit, so the backend keeps the maps.
  for (auto [available, out] : {std::pair{size_t{0}, &copied}, std::pair{size_t{1}, &mapped}}) {
    CpuBackendOptions options{8, 4, 2};
    options.available_memory_bytes = available;
    auto backend = CreateCpuBackend(*weights, c, options);
    ASSERT_TRUE(backend.ok());
    ForwardBatch b;
    b.chunks.push_back({tokens, 0, pages, true});
    ASSERT_TRUE((*backend)->Forward(b, out).ok());
  }
  EXPECT_EQ(copied, mapped);
}

TEST(CpuBackendTest, HalfPrecisionWeightsStayCloseToF32) {
  const ModelConfig c = SmallConfig();
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    TempDir f32_dir, half_dir;
    WriteModel(c, f32_dir.path(), 7, DType::kF32);
    WriteModel(c, half_dir.path(), 7, dtype);
    const auto tokens = RandomTokens(10, c.vocab_size, 1);
    const auto pages = Iota(3);
    std::vector<float> a, b;
    ForwardBatch batch;
    batch.chunks.push_back({tokens, 0, pages, true});
    ASSERT_TRUE(MakeBackend(c, f32_dir.path())->Forward(batch, &a).ok());
    ASSERT_TRUE(MakeBackend(c, half_dir.path())->Forward(batch, &b).ok());
    std::vector<double> ad(a.begin(), a.end());
    EXPECT_LT(RelativeError(b, ad), dtype == DType::kBF16 ? 5e-2 : 5e-3) << DTypeName(dtype);
  }
}

TEST(CpuBackendTest, RefusesBadTokensPositionsAndPages) {
  const ModelConfig c = SmallConfig();
  TempDir dir;
  WriteModel(c, dir.path());
  auto backend = MakeBackend(c, dir.path(), 8, 4);
  std::vector<float> logits;
  const std::vector<int32_t> bad_token = {1, 2, c.vocab_size};
  const std::vector<int32_t> ok_tokens = {1, 2, 3, 4, 5};
  const std::vector<int32_t> one_page = {0};
  const std::vector<int32_t> outside = {0, 99};
  ForwardBatch b1;
  b1.chunks.push_back({bad_token, 0, one_page, true});
  EXPECT_EQ(backend->Forward(b1, &logits).code(), StatusCode::kInvalidArgument);
  ForwardBatch b2;
  b2.chunks.push_back({ok_tokens, 0, one_page, true});  // 5 tokens need 2 pages
  EXPECT_EQ(backend->Forward(b2, &logits).code(), StatusCode::kInvalidArgument);
  ForwardBatch b3;
  b3.chunks.push_back({ok_tokens, 0, outside, true});
  EXPECT_EQ(backend->Forward(b3, &logits).code(), StatusCode::kInvalidArgument);
  ForwardBatch b4;
  b4.chunks.push_back({ok_tokens, c.max_seq_len - 2, outside, true});
  EXPECT_EQ(backend->Forward(b4, &logits).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace pdserve::model
