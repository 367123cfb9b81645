// The engine's choices (SamplingParams::n) on the tiny preset: each choice gives the tokens a
// request of one choice gives with its seed (seed + i), the prompt runs once and the other
// choices compute only its last partial page and their first token, every choice ends once and
// the request's last event says so, a cancel ends every choice, logprobs come per choice, choices
// preempted under a decode worker's policy are recomputed rather than handed back, and what cannot
// take several choices refuses them.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "model/engine.h"
#include "model/model_maker.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using testing::RandomTokens;
using testing::TempDir;

constexpr int kPage = 8;

struct ChoicesRun {
  std::map<int, std::vector<int32_t>> tokens;  // by choice
  std::map<int, int> finishes;                 // events ending each choice
  std::map<int, std::vector<float>> logprobs;  // by choice, where asked
  int ends_request = 0;
  bool last_event_ends_request = false;
  int64_t prompt_tokens_run = 0;
  std::set<uint64_t> ids;  // the sequence ids events named
};

class EngineChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeModelOptions o;
    o.preset = "tiny";
    o.out_dir = dir_.path();
    Status made = MakeModel(o);
    ASSERT_TRUE(made.ok()) << made.ToString();
  }

  std::unique_ptr<Engine> MakeEngine(
      int num_pages = 512, bool prefix_cache = true,
      EngineOptions::Preemption preemption = EngineOptions::Preemption::kRecompute) {
    EngineOptions o;
    o.page_size = kPage;
    o.num_pages = num_pages;
    o.prefix_cache = prefix_cache;
    o.preemption = preemption;
    o.kv_lookahead_tokens = 8;
    o.threads = 2;
    auto e = Engine::Load(dir_.path(), o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  static SamplingParams Params(int n, float temperature, std::optional<uint64_t> seed,
                               int max_tokens = 12) {
    SamplingParams p;
    p.n = n;
    p.temperature = temperature;
    p.seed = seed;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
  }

  static ChoicesRun Run(Engine& e) {
    ChoicesRun run;
    std::vector<TokenEvent> events;
    for (int steps = 0; e.HasWork() && steps < 10000; ++steps) {
      events.clear();
      StepStats stats;
      EXPECT_TRUE(e.Step(&events, &stats).ok());
      run.prompt_tokens_run += stats.prompt_tokens;
      for (const TokenEvent& ev : events) {
        run.ids.insert(ev.seq_id);
        EXPECT_FALSE(run.last_event_ends_request) << "an event after the request's end";
        if (ev.token >= 0) run.tokens[ev.choice].push_back(ev.token);
        if (ev.has_logprob) run.logprobs[ev.choice].push_back(ev.logprob);
        if (ev.finish != FinishReason::kNone) ++run.finishes[ev.choice];
        if (ev.ends_request) ++run.ends_request;
        run.last_event_ends_request = ev.ends_request;
      }
    }
    return run;
  }

  TempDir dir_;
};

TEST_F(EngineChoicesTest, EachChoiceIsTheRequestOfOneChoiceWithItsSeed) {
  // 37 tokens: four full pages of 8 and a partial one of 5.
  const std::vector<int32_t> prompt = RandomTokens(37, 256, 11);
  auto engine = MakeEngine();
  ASSERT_TRUE(engine->Add(prompt, Params(4, 1.0f, 500)).ok());
  const ChoicesRun got = Run(*engine);
  ASSERT_EQ(got.tokens.size(), 4u);
  std::set<std::vector<int32_t>> distinct;
  for (int i = 0; i < 4; ++i) {
    auto alone = MakeEngine();
    ASSERT_TRUE(alone->Add(prompt, Params(1, 1.0f, 500 + i)).ok());
    EXPECT_EQ(got.tokens.at(i), Run(*alone).tokens.at(0)) << "choice " << i;
    EXPECT_EQ(got.finishes.at(i), 1) << "choice " << i;
    distinct.insert(got.tokens.at(i));
  }
  EXPECT_GT(distinct.size(), 1u) << "seeded choices all alike";
  EXPECT_EQ(got.ends_request, 1);
  EXPECT_TRUE(got.last_event_ends_request);
  EXPECT_EQ(got.ids.size(), 1u) << "every event names the id Add returned";
  // The prompt once; each other choice its last partial page (5) and its first token.
  EXPECT_EQ(got.prompt_tokens_run, 37 + 3 * (5 + 1));
}

TEST_F(EngineChoicesTest, GreedyChoicesAreAlikeAndAPromptOfWholePagesIsSharedWhole) {
  const std::vector<int32_t> prompt = RandomTokens(32, 256, 12);
  auto alone = MakeEngine();
  ASSERT_TRUE(alone->Add(prompt, Params(1, 0.0f, std::nullopt)).ok());
  const std::vector<int32_t> expected = Run(*alone).tokens.at(0);

  auto engine = MakeEngine();
  ASSERT_TRUE(engine->Add(prompt, Params(3, 0.0f, std::nullopt)).ok());
  const ChoicesRun got = Run(*engine);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(got.tokens.at(i), expected) << "choice " << i;
  // Every prompt page is cached: the others compute their first token only.
  EXPECT_EQ(got.prompt_tokens_run, 32 + 2 * 1);
}

TEST_F(EngineChoicesTest, WithoutThePrefixCacheEachChoiceComputesThePromptAgain) {
  const std::vector<int32_t> prompt = RandomTokens(20, 256, 13);
  auto engine = MakeEngine(512, /*prefix_cache=*/false);
  ASSERT_TRUE(engine->Add(prompt, Params(2, 0.7f, 9)).ok());
  const ChoicesRun got = Run(*engine);
  EXPECT_EQ(got.prompt_tokens_run, 20 + (20 + 1));
  auto alone = MakeEngine(512, false);
  ASSERT_TRUE(alone->Add(prompt, Params(1, 0.7f, 10)).ok());
  EXPECT_EQ(got.tokens.at(1), Run(*alone).tokens.at(0));
}

TEST_F(EngineChoicesTest, UnseededChoicesDrawTheirOwnStreams) {
  const std::vector<int32_t> prompt = RandomTokens(10, 256, 14);
  auto engine = MakeEngine();
  ASSERT_TRUE(engine->Add(prompt, Params(4, 1.0f, std::nullopt, 16)).ok());
  const ChoicesRun got = Run(*engine);
  std::set<std::vector<int32_t>> distinct;
  for (const auto& [choice, tokens] : got.tokens) distinct.insert(tokens);
  EXPECT_GT(distinct.size(), 1u);
}

TEST_F(EngineChoicesTest, CancelEndsEveryChoiceOnce) {
  const std::vector<int32_t> prompt = RandomTokens(19, 256, 15);
  for (int steps_before : {0, 1, 3}) {
    auto engine = MakeEngine();
    auto id = engine->Add(prompt, Params(3, 1.0f, 4, 40));
    ASSERT_TRUE(id.ok());
    std::vector<TokenEvent> events;
    for (int i = 0; i < steps_before; ++i) ASSERT_TRUE(engine->Step(&events).ok());
    engine->Cancel(*id);
    events.clear();
    ASSERT_TRUE(engine->Step(&events).ok());
    std::map<int, int> cancelled;
    int ends = 0;
    for (const TokenEvent& e : events) {
      EXPECT_EQ(e.finish, FinishReason::kCancelled);
      ++cancelled[e.choice];
      ends += e.ends_request ? 1 : 0;
    }
    EXPECT_EQ(cancelled.size(), 3u) << steps_before << " steps before";
    EXPECT_EQ(ends, 1);
    EXPECT_TRUE(events.back().ends_request);
    EXPECT_FALSE(engine->HasWork());
    EXPECT_EQ(engine->pages().used_pages(), 0);
  }
}

TEST_F(EngineChoicesTest, ChoicesEndingAtTheirFirstTokenNeverRun) {
  const std::vector<int32_t> prompt = RandomTokens(12, 256, 16);
  auto engine = MakeEngine();
  ASSERT_TRUE(engine->Add(prompt, Params(5, 1.0f, 3, /*max_tokens=*/1)).ok());
  const ChoicesRun got = Run(*engine);
  EXPECT_EQ(got.tokens.size(), 5u);
  for (const auto& [choice, tokens] : got.tokens) EXPECT_EQ(tokens.size(), 1u);
  EXPECT_EQ(got.prompt_tokens_run, 12);
  EXPECT_EQ(got.ends_request, 1);
  EXPECT_EQ(engine->pages().used_pages(), 0);
}

TEST_F(EngineChoicesTest, LogprobsComePerChoice) {
  const std::vector<int32_t> prompt = RandomTokens(15, 256, 17);
  auto engine = MakeEngine();
  SamplingParams p = Params(3, 0.0f, std::nullopt, 6);
  p.logprobs = 2;
  ASSERT_TRUE(engine->Add(prompt, p).ok());
  const ChoicesRun got = Run(*engine);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(got.logprobs.at(i).size(), 6u);
    // Greedy: the same tokens, from the same distributions within float rounding (a choice
    // computes its first token's KV in a prompt chunk, choice 0 in a decode row).
    for (size_t k = 0; k < 6; ++k) {
      EXPECT_NEAR(got.logprobs.at(i)[k], got.logprobs.at(0)[k], 1e-4) << i << " " << k;
    }
  }
}

TEST_F(EngineChoicesTest, ChoicesPreemptedUnderHandBackAreRecomputedHere) {
  const std::vector<int32_t> prompt = RandomTokens(14, 256, 18);
  auto roomy = MakeEngine();
  ASSERT_TRUE(roomy->Add(prompt, Params(4, 0.9f, 77, 40)).ok());
  const ChoicesRun expected = Run(*roomy);

  // 12 pages of 8: four choices of 54 tokens (7 pages each) cannot all run at once.
  auto tight = MakeEngine(12, true, EngineOptions::Preemption::kHandBack);
  ASSERT_TRUE(tight->Add(prompt, Params(4, 0.9f, 77, 40)).ok());
  const ChoicesRun got = Run(*tight);
  EXPECT_GT(tight->num_preemptions(), 0);
  EXPECT_EQ(got.tokens, expected.tokens);
  EXPECT_EQ(got.ends_request, 1);
  for (const auto& [choice, n] : got.finishes) EXPECT_EQ(n, 1) << "choice " << choice;
}

TEST_F(EngineChoicesTest, WhatCannotTakeSeveralChoicesRefusesThem) {
  auto engine = MakeEngine();
  const std::vector<int32_t> prompt = RandomTokens(9, 256, 19);
  EXPECT_FALSE(engine->Add(prompt, Params(2, 0.0f, 1), /*keep_pages=*/true).ok());
  EXPECT_FALSE(engine->AddPrefilled(prompt, 3, {0, 1}, Params(2, 0.0f, 1)).ok());
  EXPECT_FALSE(engine->Add(prompt, Params(0, 0.0f, 1)).ok());
  EXPECT_FALSE(engine->Add(prompt, Params(SamplingParams::kMaxChoices + 1, 0.0f, 1)).ok());
  EXPECT_FALSE(engine->HasWork());
}

}  // namespace
}  // namespace pdserve::model
