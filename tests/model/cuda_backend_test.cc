// The CUDA backend against the CPU backend on the same random weights: logits within bf16
// tolerance (relative error under kTolerance, the largest difference over the largest CPU
// logit) for prompt steps, chunked prompts over earlier context, decode steps, long contexts
// whose keys are split (flash-decoding), and mixed batches; the KV pages' layout on the device,
// the per-layer KV callback, the device argmax and what the backend refuses. Tests that need a
// GPU skip, saying so, only where the machine has none (tests/gpu_presence.h); where it has one,
// a build without the CUDA backend or a CUDA that finds no device fails them. Greedy tokens on
// both devices: cuda_greedy_test.cc; device names: cuda_device_test.cc; the step planner:
// cuda_step_plan_test.cc.
#include "model/cuda/cuda_backend.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "model/cpu_backend.h"
#include "model/engine.h"
#include "model/model_maker.h"
#include "model/weights.h"
#include "tests/model/cuda_vs_cpu.h"
#include "tests/model/random_model.h"

#if PDSERVE_HAVE_CUDA_BACKEND
#include <cuda_runtime_api.h>
#endif

namespace pdserve::model {
namespace {

using testing::Iota;
using testing::kTolerance;
using testing::RandomTokens;
using testing::SmallConfig;
using testing::WriteModel;

// max |got - want| / max |want| over rows [row, row + rows) of vocab-wide logits.
double RelativeError(const std::vector<float>& got, const std::vector<float>& want, int vocab,
                     int row = 0, int rows = -1) {
  if (rows < 0) rows = static_cast<int>(want.size()) / vocab;
  double max_diff = 0, max_ref = 0;
  for (size_t i = static_cast<size_t>(row) * vocab; i < static_cast<size_t>(row + rows) * vocab;
       ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(got[i]) - want[i]));
    max_ref = std::max(max_ref, std::abs(static_cast<double>(want[i])));
  }
  return max_diff / max_ref;
}

// Both backends on one model directory, each with its own KV pool of the same shape.
struct Pair {
  std::unique_ptr<Backend> cpu;
  std::unique_ptr<CudaBackend> gpu;
};

Pair MakePair(const ModelConfig& c, const std::string& dir, int pages = 64, int page_size = 4,
              int gemv_max_rows = 4, bool decode_attention_kernel = true) {
  auto weights = Weights::Load(dir, c);
  EXPECT_TRUE(weights.ok()) << weights.status().ToString();
  Pair p;
  auto cpu = CreateCpuBackend(*weights, c, {pages, page_size, 2});
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  if (cpu.ok()) p.cpu = std::move(cpu).value();
  CudaBackendOptions o;
  o.num_pages = pages;
  o.page_size = page_size;
  o.gemv_max_rows = gemv_max_rows;
  o.decode_attention_kernel = decode_attention_kernel;
  auto gpu = CreateCudaBackend(*weights, c, o);
  EXPECT_TRUE(gpu.ok()) << gpu.status().ToString();
  if (gpu.ok()) p.gpu = std::move(gpu).value();
  return p;
}

// Runs `batch` on both; expects every logit row within tolerance. Returns the CPU's logits.
std::vector<float> ExpectSameLogits(Pair& p, const ForwardBatch& batch, const std::string& what) {
  std::vector<float> want, got;
  Status s = p.cpu->Forward(batch, &want);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = p.gpu->Forward(batch, &got);
  EXPECT_TRUE(s.ok()) << what << ": " << s.ToString();
  EXPECT_EQ(got.size(), want.size()) << what;
  if (got.size() != want.size() || want.empty()) return want;
  const int vocab = p.cpu->config().vocab_size;
  for (int r = 0; r < static_cast<int>(want.size()) / vocab; ++r) {
    EXPECT_LT(RelativeError(got, want, vocab, r, 1), kTolerance) << what << ", logit row " << r;
  }
  return want;
}

// Runs `tokens` as prompt chunks of the given sizes (each attending to the ones before, every
// row's logits), then one token a step to the end, comparing every step.
void ExpectChunksThenDecodes(Pair& p, std::span<const int32_t> tokens,
                             const std::vector<int32_t>& pages, std::initializer_list<int> chunks) {
  int pos = 0;
  for (int n : chunks) {
    ForwardBatch b;
    b.chunks.push_back({tokens.subspan(pos, n), pos, pages, true});
    b.all_logits = true;
    ExpectSameLogits(p, b, "prompt chunk at " + std::to_string(pos));
    pos += n;
  }
  for (; pos < static_cast<int>(tokens.size()); ++pos) {
    ForwardBatch b;
    b.chunks.push_back({tokens.subspan(pos, 1), pos, pages, true});
    ExpectSameLogits(p, b, "decode at " + std::to_string(pos));
  }
}

// A prompt in one step, with every row's logits.
void ExpectPromptMatches(const ModelConfig& c, DType dtype, int gemv_max_rows = 4) {
  testing::TempDir dir;
  WriteModel(c, dir.path(), 7, dtype);
  Pair p = MakePair(c, dir.path(), 64, 4, gemv_max_rows);
  ASSERT_TRUE(p.cpu && p.gpu);
  for (int n : {1, 3, 23}) {  // 1 and 3 rows: the GEMV kernel; 23: cuBLAS
    const auto tokens = RandomTokens(n, c.vocab_size, 11 + n);
    const auto pages = Iota(8);
    ForwardBatch batch;
    batch.chunks.push_back({tokens, 0, pages, true});
    batch.all_logits = true;
    ExpectSameLogits(p, batch, "prompt of " + std::to_string(n));
  }
}

// A config with head_dim 128 and sizes that are multiples of 8, as real models have: the
// vectorised paths of the attention and GEMV kernels.
ModelConfig WideConfig() {
  ModelConfig c = SmallConfig();
  c.dim = 256;
  c.hidden_dim = 512;
  c.n_heads = 4;
  c.n_kv_heads = 1;
  c.head_dim = 128;
  c.vocab_size = 384;
  c.max_seq_len = 2048;
  return c;
}

TEST(CudaBackendTest, LlamaPromptMatchesCpu) {
  REQUIRE_GPU();
  ExpectPromptMatches(SmallConfig(), DType::kBF16);
}

TEST(CudaBackendTest, F32WeightsConvertedToBf16StayWithinTolerance) {
  REQUIRE_GPU();
  ExpectPromptMatches(SmallConfig(), DType::kF32);
}

TEST(CudaBackendTest, Qwen2BiasesTiedEmbeddingsAndOneKvHeadMatchCpu) {
  REQUIRE_GPU();
  ModelConfig c = SmallConfig();
  c.architecture = "Qwen2ForCausalLM";
  c.attention_bias = true;
  c.tie_word_embeddings = true;
  c.n_kv_heads = 1;
  ExpectPromptMatches(c, DType::kBF16);
}

TEST(CudaBackendTest, Llama3RopeScalingAndOddSizesMatchCpu) {
  REQUIRE_GPU();
  ModelConfig c = SmallConfig();
  c.rope_scaling = RopeScaling{"llama3", 8.0, 1.0, 4.0, 64};
  c.rope_theta = 500000;
  c.dim = 52;  // not a multiple of 8: cuBLAS for every product, scalar loads in attention
  c.head_dim = 14;
  c.hidden_dim = 70;
  ExpectPromptMatches(c, DType::kF16);
}

TEST(CudaBackendTest, WideHeadsMatchCpuWithGemvAndWithCublas) {
  REQUIRE_GPU();
  ExpectPromptMatches(WideConfig(), DType::kBF16, /*gemv_max_rows=*/8);
  ExpectPromptMatches(WideConfig(), DType::kBF16, /*gemv_max_rows=*/0);
}

TEST(CudaBackendTest, ManyQueryHeadsPerKvHeadMatchCpu) {
  REQUIRE_GPU();
  ModelConfig c = SmallConfig();
  c.n_heads = 20;  // groups of 10 query heads
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.dim = 160;
  ExpectPromptMatches(c, DType::kBF16);
}

TEST(CudaBackendTest, OtherHeadSizesMatchCpu) {
  REQUIRE_GPU();
  for (int head_dim : {96, 160, 256}) {  // lanes past head_dim idle; 8 dims a lane above 128
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    ModelConfig c = SmallConfig();
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.head_dim = head_dim;
    c.dim = 128;
    ExpectPromptMatches(c, DType::kBF16);
  }
}

TEST(CudaBackendTest, ChunkedPromptAndDecodeStepsMatchCpu) {
  REQUIRE_GPU();
  const ModelConfig c = WideConfig();
  testing::TempDir dir;
  WriteModel(c, dir.path(), 3, DType::kBF16);
  Pair p = MakePair(c, dir.path(), 64, 16);
  ASSERT_TRUE(p.cpu && p.gpu);
  const auto tokens = RandomTokens(60, c.vocab_size, 5);
  const std::vector<int32_t> pages = {9, 40, 2, 33, 17};  // scattered
  ExpectChunksThenDecodes(p, tokens, pages, {7, 19, 14});
}

TEST(CudaBackendTest, LongContextSplitKeysMatchCpu) {
  REQUIRE_GPU();
  const ModelConfig c = WideConfig();
  testing::TempDir dir;
  WriteModel(c, dir.path(), 4, DType::kBF16);
  Pair p = MakePair(c, dir.path(), 160, 16);
  ASSERT_TRUE(p.cpu && p.gpu);
  const auto tokens = RandomTokens(1500, c.vocab_size, 8);
  std::vector<int32_t> pages = Iota(100);
  std::reverse(pages.begin(), pages.end());
  // Two big chunks (cuBLAS, many query tiles), then batch-1 decode over ~1500 keys, which the
  // planner splits.
  ExpectChunksThenDecodes(p, tokens, pages, {700, 797});
}

TEST(CudaBackendTest, MixedBatchOfPromptsAndDecodesMatchesCpu) {
  REQUIRE_GPU();
  for (const ModelConfig& c : {SmallConfig(), WideConfig()}) {
    testing::TempDir dir;
    WriteModel(c, dir.path(), 9, DType::kBF16);
    Pair p = MakePair(c, dir.path(), 128, 4);
    ASSERT_TRUE(p.cpu && p.gpu);
    struct Seq {
      std::vector<int32_t> tokens, pages;
      int start;
    };
    std::vector<Seq> seqs;
    for (int i = 0; i < 6; ++i) {
      Seq s{RandomTokens(5 + 7 * i, c.vocab_size, 100 + i), Iota(12, i * 12), 0};
      s.start = i < 3 ? 0 : static_cast<int>(s.tokens.size()) - 1;
      seqs.push_back(std::move(s));
    }
    for (int i = 3; i < 6; ++i) {  // the decoding ones have their prompt's KV on both
      ForwardBatch b;
      b.chunks.push_back({std::span(seqs[i].tokens).first(seqs[i].start), 0, seqs[i].pages, true});
      ExpectSameLogits(p, b, "prefill of sequence " + std::to_string(i));
    }
    ForwardBatch mixed;
    for (int i : {4, 0, 3, 2, 5, 1}) {
      mixed.chunks.push_back(
          {std::span(seqs[i].tokens).subspan(seqs[i].start), seqs[i].start, seqs[i].pages, true});
    }
    ExpectSameLogits(p, mixed, "mixed batch");
    // Three decode rows alone: the GEMV path with a batch of rows.
    ForwardBatch decodes;
    for (int i : {5, 3, 4}) {
      decodes.chunks.push_back({std::span(seqs[i].tokens).subspan(seqs[i].start, 1), seqs[i].start,
                                seqs[i].pages, true});
    }
    ExpectSameLogits(p, decodes, "decode rows");
  }
}

// Decode steps of several sequences at once over scattered pages, long enough that their keys
// are split (and, with the decode kernel, merged by the splits' last block), with the decode
// attention kernel and without it.
void ExpectDecodeBatchesMatch(const ModelConfig& c, bool decode_kernel) {
  SCOPED_TRACE(fmt::format("head_dim {}, {} query heads over {} KV heads, decode kernel {}",
                           c.head_dim, c.n_heads, c.n_kv_heads, decode_kernel));
  testing::TempDir dir;
  WriteModel(c, dir.path(), 21, DType::kBF16);
  Pair p = MakePair(c, dir.path(), 96, 16, 4, decode_kernel);
  ASSERT_TRUE(p.cpu && p.gpu);
  struct Seq {
    std::vector<int32_t> tokens, pages;
    int pos;
  };
  std::vector<Seq> seqs;
  std::mt19937 rng(5);
  std::vector<int32_t> free_pages = Iota(96);
  std::shuffle(free_pages.begin(), free_pages.end(), rng);
  for (int i = 0; i < 3; ++i) {  // prompts of 9, 40 and 71 tokens, then 25 decode steps
    Seq s{RandomTokens(34 + 31 * i, c.vocab_size, 60 + i), {}, 9 + 31 * i};
    s.pages.assign(free_pages.begin() + 8 * i, free_pages.begin() + 8 * i + 8);
    ForwardBatch b;
    b.chunks.push_back({std::span(s.tokens).first(s.pos), 0, s.pages, true});
    ExpectSameLogits(p, b, "prompt " + std::to_string(i));
    seqs.push_back(std::move(s));
  }
  for (int step = 0; step < 24; ++step) {
    ForwardBatch b;
    for (int i : {2, 0, 1}) {
      Seq& s = seqs[i];
      b.chunks.push_back({std::span(s.tokens).subspan(s.pos, 1), s.pos, s.pages, true});
    }
    ExpectSameLogits(p, b, "decode step " + std::to_string(step));
    for (Seq& s : seqs) ++s.pos;
  }
  // One sequence alone: batch 1, where the keys split finest.
  ForwardBatch alone;
  alone.chunks.push_back(
      {std::span(seqs[2].tokens).subspan(seqs[2].pos, 1), seqs[2].pos, seqs[2].pages, true});
  ExpectSameLogits(p, alone, "batch-1 decode");
}

TEST(CudaBackendTest, DecodeBatchesMatchCpuWithEitherAttentionKernel) {
  REQUIRE_GPU();
  struct Shape {
    int head_dim, n_heads, n_kv_heads;
  };
  // 16, 64, 128, 256 dims (8, 8, 16 and 32 lanes a key; 96: lanes past head_dim idle); tiles
  // of 1, 2, 3 (rounded up to 4), 4 and 8 query heads; 10 falls back to the general kernel.
  for (const Shape& shape : std::vector<Shape>{{128, 4, 1},
                                               {64, 16, 2},
                                               {256, 4, 2},
                                               {96, 2, 2},
                                               {16, 6, 2},
                                               {128, 8, 1},
                                               {16, 20, 2}}) {
    ModelConfig c = WideConfig();
    c.head_dim = shape.head_dim;
    c.n_heads = shape.n_heads;
    c.n_kv_heads = shape.n_kv_heads;
    for (bool decode_kernel : {true, false}) ExpectDecodeBatchesMatch(c, decode_kernel);
  }
}

// Qwen3 dense: q and k normalised per head before RoPE, on heads wider than dim / n_heads (256
// over 4 heads, head_dim 128, as Qwen3-0.6B's), tied embeddings; prompts with the GEMV kernel
// and cuBLAS, decode steps with either attention kernel, and the norms after q/k/v biases.
TEST(CudaBackendTest, Qwen3QkNormsMatchCpu) {
  REQUIRE_GPU();
  ModelConfig c = WideConfig();
  c.architecture = "Qwen3ForCausalLM";
  c.qk_norm = true;
  c.tie_word_embeddings = true;
  c.n_kv_heads = 2;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 1000000.0;
  ExpectPromptMatches(c, DType::kBF16, /*gemv_max_rows=*/8);
  ExpectPromptMatches(c, DType::kBF16, /*gemv_max_rows=*/0);
  for (bool decode_kernel : {true, false}) ExpectDecodeBatchesMatch(c, decode_kernel);
  ModelConfig biased = SmallConfig();
  biased.architecture = "Qwen3ForCausalLM";
  biased.qk_norm = true;
  biased.attention_bias = true;
  biased.head_dim = 32;
  ExpectPromptMatches(biased, DType::kBF16);
}

TEST(CudaBackendTest, KvPagesHoldTheCpuLayoutInBf16OnTheDevice) {
  REQUIRE_GPU();
#if PDSERVE_HAVE_CUDA_BACKEND
  const ModelConfig c = SmallConfig();
  testing::TempDir dir;
  WriteModel(c, dir.path(), 2, DType::kBF16);
  Pair p = MakePair(c, dir.path(), 16, 4);
  ASSERT_TRUE(p.cpu && p.gpu);
  const KvCacheShape& shape = p.gpu->kv_shape();
  EXPECT_EQ(shape.dtype, DType::kBF16);
  EXPECT_EQ(shape.num_pages, 16);
  EXPECT_EQ(shape.page_size, 4);
  const auto tokens = RandomTokens(10, c.vocab_size, 3);
  const std::vector<int32_t> pages = {5, 11, 2};
  ForwardBatch b;
  b.chunks.push_back({tokens, 0, pages, true});
  std::vector<float> scratch;
  ASSERT_TRUE(p.cpu->Forward(b, &scratch).ok());
  ASSERT_TRUE(p.gpu->Forward(b, &scratch).ok());
  for (int layer = 0; layer < c.n_layers; ++layer) {
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, p.gpu->KvLayerData(layer)), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice);
    std::vector<uint16_t> gpu(shape.layer_elems());
    ASSERT_EQ(cudaMemcpy(gpu.data(), p.gpu->KvLayerData(layer), shape.layer_bytes(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    const float* cpu = static_cast<const float*>(p.cpu->KvLayerData(layer));
    double max_diff = 0, max_ref = 0;
    for (int pos = 0; pos < 10; ++pos)
      for (int kv = 0; kv < 2; ++kv) {
        const size_t at = shape.Offset(pages[pos / 4], kv, pos % 4);
        for (int i = 0; i < shape.kv_dim(); ++i) {
          max_diff = std::max<double>(max_diff, std::abs(BF16ToFloat(gpu[at + i]) - cpu[at + i]));
          max_ref = std::max<double>(max_ref, std::abs(cpu[at + i]));
        }
      }
    EXPECT_LT(max_diff / max_ref, kTolerance) << "layer " << layer;
    EXPECT_GT(max_ref, 0.0);
  }
#endif
}

TEST(CudaBackendTest, AfterLayerKvIsCalledOncePerLayerInOrder) {
  REQUIRE_GPU();
  const ModelConfig c = SmallConfig();
  testing::TempDir dir;
  WriteModel(c, dir.path(), 2, DType::kBF16);
  Pair p = MakePair(c, dir.path());
  ASSERT_TRUE(p.gpu);
  const auto tokens = RandomTokens(9, c.vocab_size, 1);
  const auto pages = Iota(3);
  std::vector<int> layers;
  ForwardBatch b;
  b.chunks.push_back({tokens, 0, pages, true});
  b.after_layer_kv = [&](int layer) { layers.push_back(layer); };
  std::vector<float> logits;
  ASSERT_TRUE(p.gpu->Forward(b, &logits).ok());
  EXPECT_EQ(layers, Iota(c.n_layers));
}

TEST(CudaBackendTest, DeviceArgmaxPicksTheLargestLogit) {
  REQUIRE_GPU();
  const ModelConfig c = WideConfig();
  testing::TempDir dir;
  WriteModel(c, dir.path(), 6, DType::kBF16);
  Pair p = MakePair(c, dir.path());
  ASSERT_TRUE(p.gpu);
  const auto a = RandomTokens(12, c.vocab_size, 1), b = RandomTokens(5, c.vocab_size, 2);
  const auto pages_a = Iota(4), pages_b = Iota(4, 10);
  ForwardBatch batch;
  batch.chunks.push_back({a, 0, pages_a, true});
  batch.chunks.push_back({b, 0, pages_b, true});
  batch.all_logits = true;
  std::vector<float> logits;
  std::vector<int32_t> tokens;
  ASSERT_TRUE(p.gpu->Forward(batch, &logits).ok());
  ASSERT_TRUE(p.gpu->ForwardGreedy(batch, &tokens).ok());
  ASSERT_EQ(tokens.size(), 17u);
  for (size_t r = 0; r < tokens.size(); ++r) {
    const auto row = std::span(logits).subspan(r * c.vocab_size, c.vocab_size);
    EXPECT_EQ(tokens[r], std::max_element(row.begin(), row.end()) - row.begin()) << "row " << r;
  }
}

TEST(CudaBackendTest, RefusesBadTokensPositionsAndPages) {
  REQUIRE_GPU();
  const ModelConfig c = SmallConfig();
  testing::TempDir dir;
  WriteModel(c, dir.path());
  Pair p = MakePair(c, dir.path(), 8, 4);
  ASSERT_TRUE(p.gpu);
  std::vector<float> logits;
  const std::vector<int32_t> bad_token = {1, 2, c.vocab_size}, one_page = {0};
  ForwardBatch b;
  b.chunks.push_back({bad_token, 0, one_page, true});
  EXPECT_EQ(p.gpu->Forward(b, &logits).code(), StatusCode::kInvalidArgument);
  // The backend still works after a refusal.
  const std::vector<int32_t> ok = {1, 2, 3};
  ForwardBatch good;
  good.chunks.push_back({ok, 0, one_page, true});
  EXPECT_TRUE(p.gpu->Forward(good, &logits).ok());
  EXPECT_EQ(logits.size(), static_cast<size_t>(c.vocab_size));
}

}  // namespace
}  // namespace pdserve::model
