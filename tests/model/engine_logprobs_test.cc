// The engine's logprobs on the tiny preset against a double-precision forward written apart
// from the engine (tests/model/reference_llama.h): generated tokens', and a prompt's (computed
// whole in chunks of SamplingParams::kMaxPromptLogprobRows, never taken from the prefix cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/engine.h"
#include "model/model_maker.h"
#include "tests/model/random_model.h"
#include "tests/model/reference_llama.h"

namespace pdserve::model {
namespace {

// log_softmax of a double row.
std::vector<double> LogSoftmax(const std::vector<double>& logits) {
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double x : logits) sum += std::exp(x - max);
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - max - std::log(sum);
  return out;
}

class EngineLogprobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeModelOptions m;
    m.out_dir = dir_.path();
    ASSERT_TRUE(MakeModel(m).ok());
    auto config = ModelConfig::Load(dir_.path());
    ASSERT_TRUE(config.ok());
    config_ = *config;
    ref_ = testing::LoadRef(config_, dir_.path());
  }

  Result<std::unique_ptr<Engine>> LoadEngine() {
    EngineOptions o;
    o.threads = 1;
    o.kv_memory_mb = 16;
    return Engine::Load(dir_.path(), o);
  }

  // Generates `n` tokens with logprobs 5: every event.
  std::vector<TokenEvent> Generate(const std::vector<int32_t>& prompt, float temperature, int n,
                                   std::vector<std::pair<int32_t, float>> bias = {}) {
    auto e = LoadEngine();
    EXPECT_TRUE(e.ok());
    SamplingParams p;
    p.temperature = temperature;
    p.seed = 5;
    p.max_tokens = n;
    p.ignore_eos = true;
    p.logprobs = 5;
    p.logit_bias = std::move(bias);
    EXPECT_TRUE((*e)->Add(prompt, p).ok());
    std::vector<TokenEvent> all, events;
    while ((*e)->HasWork()) {
      events.clear();
      EXPECT_TRUE((*e)->Step(&events).ok());
      all.insert(all.end(), events.begin(), events.end());
    }
    return all;
  }

  // Each event's logprob and top 5 against the reference's distribution at its position.
  void ExpectMatchesReference(const std::vector<int32_t>& prompt,
                              const std::vector<TokenEvent>& events) {
    std::vector<int32_t> tokens = prompt;
    for (const TokenEvent& e : events) tokens.push_back(e.token);
    const auto logits = testing::RefForward(ref_, tokens);
    for (size_t i = 0; i < events.size(); ++i) {
      const TokenEvent& e = events[i];
      ASSERT_TRUE(e.has_logprob);
      const std::vector<double> want = LogSoftmax(logits[prompt.size() - 1 + i]);
      EXPECT_NEAR(e.logprob, want[static_cast<size_t>(e.token)], 1e-4) << "token " << i;
      std::vector<int32_t> order(want.size());
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                        [&](int32_t a, int32_t b) { return want[a] > want[b]; });
      ASSERT_EQ(e.top_logprobs.size(), 5u);
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(e.top_logprobs[k].first, order[k]) << "token " << i << " rank " << k;
        EXPECT_NEAR(e.top_logprobs[k].second, want[static_cast<size_t>(order[k])], 1e-4);
      }
    }
  }

  testing::TempDir dir_;
  ModelConfig config_;
  testing::RefModel ref_;
};

TEST_F(EngineLogprobsTest, GreedyTopOneIsTheTokenChosenAndValuesMatchADoubleReference) {
  const auto prompt = testing::RandomTokens(12, config_.vocab_size, 9);
  const auto events = Generate(prompt, 0.0f, 6);
  ASSERT_EQ(events.size(), 6u);
  for (const TokenEvent& e : events) EXPECT_EQ(e.top_logprobs.at(0).first, e.token);
  ExpectMatchesReference(prompt, events);
}

TEST_F(EngineLogprobsTest, SampledTokensReportTheModelsDistributionNotTheTemperatures) {
  const auto prompt = testing::RandomTokens(9, config_.vocab_size, 4);
  const auto events = Generate(prompt, 1.7f, 6);
  ASSERT_EQ(events.size(), 6u);
  ExpectMatchesReference(prompt, events);
}

// logit_bias moves the choice; the logprobs reported stay the model's own.
TEST_F(EngineLogprobsTest, LogitBiasChoosesTheTokenAndLogprobsStayTheModels) {
  const auto prompt = testing::RandomTokens(10, config_.vocab_size, 2);
  const auto events = Generate(prompt, 0.0f, 3, {{42, 100.0f}});
  ASSERT_EQ(events.size(), 3u);
  for (const TokenEvent& e : events) EXPECT_EQ(e.token, 42);
  ExpectMatchesReference(prompt, events);

  auto e = LoadEngine();
  ASSERT_TRUE(e.ok());
  SamplingParams p;
  p.logit_bias = {{config_.vocab_size, 1.0f}};
  EXPECT_FALSE((*e)->Add(prompt, p).ok());  // outside the vocabulary
  p.logit_bias = {{1, 101.0f}};
  EXPECT_FALSE((*e)->Add(prompt, p).ok());
}

TEST_F(EngineLogprobsTest, PromptLogprobsMatchTheReferenceAcrossChunksAndIgnoreTheCache) {
  // Longer than a step's rows of them: the prompt runs in two chunks.
  const int length = SamplingParams::kMaxPromptLogprobRows + 40;
  ASSERT_LT(length + 4, config_.max_seq_len);
  const auto prompt = testing::RandomTokens(length, config_.vocab_size, 31);
  const auto logits = testing::RefForward(ref_, prompt);
  auto e = LoadEngine();
  ASSERT_TRUE(e.ok());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 2;
  p.logprobs = 3;
  // The same prompt twice: the second finds it cached, and computes it whole all the same.
  for (int run = 0; run < 2; ++run) {
    p.prompt_logprobs = true;
    ASSERT_TRUE((*e)->Add(prompt, p).ok());
    std::vector<TokenEvent> all, events;
    int steps = 0;
    while ((*e)->HasWork()) {
      events.clear();
      ASSERT_TRUE((*e)->Step(&events).ok());
      all.insert(all.end(), events.begin(), events.end());
      ++steps;
    }
    ASSERT_EQ(all.size(), 2u);
    EXPECT_GE(steps, 3) << "two prompt chunks and a decode step";
    EXPECT_EQ(all[0].cached_tokens, 0) << "run " << run;
    const TokenEvent& first = all[0];
    ASSERT_EQ(first.prompt_logprobs.size(), prompt.size() - 1);
    ASSERT_EQ(first.prompt_top_logprobs.size(), prompt.size() - 1);
    EXPECT_TRUE(all[1].prompt_logprobs.empty());
    for (size_t k = 1; k < prompt.size(); ++k) {
      const std::vector<double> want = LogSoftmax(logits[k - 1]);
      EXPECT_NEAR(first.prompt_logprobs[k - 1], want[static_cast<size_t>(prompt[k])], 1e-4)
          << "prompt token " << k;
      const auto& top = first.prompt_top_logprobs[k - 1];
      ASSERT_EQ(top.size(), 3u);
      EXPECT_EQ(top[0].first, std::max_element(want.begin(), want.end()) - want.begin());
      EXPECT_NEAR(top[0].second, *std::max_element(want.begin(), want.end()), 1e-4);
    }
  }
  p.prompt_logprobs = true;
  p.logprobs = -1;
  EXPECT_FALSE((*e)->Add(prompt, p).ok()) << "prompt logprobs without a top count";
}

}  // namespace
}  // namespace pdserve::model
