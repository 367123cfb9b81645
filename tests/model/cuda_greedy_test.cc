// Greedy tokens of the engine on cuda:0 against those on the CPU for the same bf16 weights, up
// to the CPU's first near-tie (its two best logits within kTolerance of each other), over at
// least kMinGreedyCompared tokens; and the comparison itself, checked on two CPU engines. The
// GPU test skips, saying so, only where the machine has no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <span>

#include "model/cpu_backend.h"
#include "model/engine.h"
#include "model/kv_pool.h"
#include "model/model_maker.h"
#include "model/weights.h"
#include "tests/model/cuda_vs_cpu.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using testing::Iota;
using testing::kTolerance;
using testing::RandomTokens;

// The position of the CPU's first near-tie in `tokens` (prompt then generated), or the number
// generated: where the two best logits lie within the tolerance of each other.
int FirstNearTie(Backend& cpu, const std::vector<int32_t>& prompt,
                 const std::vector<int32_t>& generated) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const auto pages = Iota(PagesForTokens(static_cast<int>(all.size()), cpu.kv_shape().page_size));
  ForwardBatch b;
  b.chunks.push_back({all, 0, pages, true});
  b.all_logits = true;
  std::vector<float> logits;
  EXPECT_TRUE(cpu.Forward(b, &logits).ok());
  const int vocab = cpu.config().vocab_size;
  for (size_t i = 0; i < generated.size(); ++i) {
    const auto row = std::span(logits).subspan((prompt.size() - 1 + i) * vocab, vocab);
    std::vector<float> sorted(row.begin(), row.end());
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    double max_abs = 0;
    for (float v : row) max_abs = std::max<double>(max_abs, std::abs(v));
    if (sorted[0] - sorted[1] <= kTolerance * max_abs) return static_cast<int>(i);
  }
  return static_cast<int>(generated.size());
}

std::vector<int32_t> Generate(Engine& engine, const std::vector<int32_t>& prompt, int n) {
  SamplingParams params;
  params.temperature = 0;
  params.max_tokens = n;
  params.ignore_eos = true;
  EXPECT_TRUE(engine.Add(prompt, params).ok());
  std::vector<int32_t> tokens;
  std::vector<TokenEvent> events;
  while (engine.HasWork()) {
    events.clear();
    Status s = engine.Step(&events);
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) break;
    for (const auto& e : events) tokens.push_back(e.token);
  }
  return tokens;
}

// Greedy tokens of `engine` against those of `reference` for 20 prompts of 24 tokens each,
// compared up to the first position where the CPU's two best logits (from `scorer`) are within
// tolerance of each other; returns how many tokens were compared.
int CompareGreedyUpToTheFirstNearTies(Engine& reference, Engine& engine, Backend& scorer) {
  const int vocab = scorer.config().vocab_size;
  int compared = 0;
  for (int i = 0; i < 20; ++i) {
    const auto prompt = RandomTokens(3 + 11 * i, vocab, 1000 + i);
    const auto want = Generate(reference, prompt, 24);
    const auto got = Generate(engine, prompt, 24);
    EXPECT_EQ(want.size(), 24u);
    EXPECT_EQ(got.size(), 24u);
    if (want.size() != 24u || got.size() != 24u) continue;
    const int tie = FirstNearTie(scorer, prompt, want);
    for (int j = 0; j < tie; ++j) {
      EXPECT_EQ(got[j], want[j]) << "prompt " << i << ", token " << j << " (first near-tie at "
                                 << tie << ")";
    }
    compared += tie;
  }
  std::cout << "compared " << compared << " of 480 tokens before the first near-ties\n";
  return compared;
}

// The comparison must look at enough tokens to mean something: ties cut each prompt short, and a
// scorer that saw ties everywhere would compare none. Where they fall depends only on the CPU's
// tokens and logits, the same on every machine (its kernels' logits are bit-identical across
// ISAs): these 20 prompts on these weights (seed 5) compare 94 of their 480 tokens.
constexpr int kMinGreedyCompared = 80;

// The comparison itself on two CPU engines (one thread against two: greedy decoding is
// batch-invariant and thread-invariant): everything it compares agrees, and it compares enough.
TEST(CudaDeviceTest, GreedyComparisonComparesEnoughTokensOnTwoCpuEngines) {
  testing::TempDir dir;
  MakeModelOptions m;
  m.out_dir = dir.path();
  m.dtype = DType::kBF16;
  m.seed = 5;
  ASSERT_TRUE(MakeModel(m).ok());
  EngineOptions one, two;
  one.threads = 1;
  two.threads = 2;
  auto a = Engine::Load(dir.path(), one);
  auto b = Engine::Load(dir.path(), two);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  const ModelConfig c = (*a)->config();
  auto reference = Weights::Load(dir.path(), c);
  ASSERT_TRUE(reference.ok());
  auto scorer = CreateCpuBackend(*reference, c, {64, 16, 2});
  ASSERT_TRUE(scorer.ok());
  EXPECT_GE(CompareGreedyUpToTheFirstNearTies(**a, **b, **scorer), kMinGreedyCompared);
}

// What `pdserve generate --device cpu|cuda:0` does for 20 prompts: greedy tokens agree up to
// the first position where the CPU's two best logits are within tolerance of each other, over at
// least kMinGreedyCompared tokens.
TEST(CudaBackendTest, GreedyTokensAgreeWithCpuUpToTheFirstNearTie) {
  REQUIRE_GPU();
  testing::TempDir dir;
  MakeModelOptions m;
  m.out_dir = dir.path();
  m.dtype = DType::kBF16;  // the same weights on both devices
  m.seed = 5;
  ASSERT_TRUE(MakeModel(m).ok());
  EngineOptions cpu_options, gpu_options;
  cpu_options.threads = 2;
  gpu_options.device = "cuda:0";
  auto cpu = Engine::Load(dir.path(), cpu_options);
  auto gpu = Engine::Load(dir.path(), gpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  const ModelConfig c = (*cpu)->config();
  auto reference = Weights::Load(dir.path(), c);
  ASSERT_TRUE(reference.ok());
  auto scorer = CreateCpuBackend(*reference, c, {64, 16, 2});
  ASSERT_TRUE(scorer.ok());
  EXPECT_GE(CompareGreedyUpToTheFirstNearTies(**cpu, **gpu, **scorer), kMinGreedyCompared);
}

}  // namespace
}  // namespace pdserve::model
