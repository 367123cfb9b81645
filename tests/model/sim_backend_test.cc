// SimBackend: each step takes the time its profile predicts for the step's work (never less;
// not much more on an idle machine), or that times a factor drawn from the profile's spread, a
// decode step right after another waits out the profile's gap between them, layer hooks come in
// order through the step, tokens are fixed by the prompt, faults fail or freeze steps, and the
// real engine drives it through its scheduler and page pool.
#include "model/sim/sim_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "model/engine.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using Clock = std::chrono::steady_clock;

PerformanceProfile TestProfile() {
  PerformanceProfile p;
  p.name = "test";
  p.prefill = {0.03, 1e-4, 0};  // 30 ms + 0.1 ms a prompt token
  p.decode = {0.01, 1e-3, 0};   // 10 ms + 1 ms a sequence
  p.range = {4096, 256, 256};
  p.kv_bytes_per_token = 1024;
  p.kv_bytes_per_second = 1e9;
  p.n_layers = 2;
  p.kv_pages = 64;
  return p;
}

Result<std::unique_ptr<Engine>> SimEngine(const PerformanceProfile& p,
                                          std::shared_ptr<SimFaults> faults = nullptr,
                                          double slow = 1.0) {
  SimBackendOptions o;
  o.profile = p;
  o.slow_factor = slow;
  o.faults = std::move(faults);
  PDSERVE_ASSIGN_OR_RETURN(auto backend, CreateSimBackend(testing::SmallConfig(), o));
  EngineOptions e;
  e.page_size = 16;
  return std::make_unique<Engine>(std::move(backend), e);
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Steps until no work is left; each step's stats and wall time.
std::vector<std::pair<StepStats, double>> RunAll(Engine& engine,
                                                 std::vector<TokenEvent>* events = nullptr) {
  std::vector<std::pair<StepStats, double>> steps;
  std::vector<TokenEvent> local;
  while (engine.HasWork()) {
    StepStats stats;
    const auto start = Clock::now();
    EXPECT_TRUE(engine.Step(events ? events : &local, &stats).ok());
    steps.push_back({stats, Seconds(Clock::now() - start)});
  }
  return steps;
}

SamplingParams Greedy(int max_tokens) {
  SamplingParams s;
  s.max_tokens = max_tokens;
  s.temperature = 0;
  return s;
}

TEST(SimBackend, EachStepTakesTheProfilesTime) {
  auto engine = SimEngine(TestProfile());
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  ASSERT_TRUE((*engine)->Add(testing::RandomTokens(100, 96, 1), Greedy(4)).ok());
  ASSERT_TRUE((*engine)->Add(testing::Iota(50, 1), Greedy(4)).ok());
  const auto steps = RunAll(**engine);
  ASSERT_EQ(steps.size(), 4u);  // one prefill step of both prompts, then three decode steps
  for (const auto& [stats, seconds] : steps) {
    const double want = TestProfile().StepSeconds(stats.shape);
    // Never less; how little more on an idle machine is scripts/sim-validity's to measure (a
    // wall-clock bound here would fail on a loaded one).
    EXPECT_GE(seconds, want) << "prompt " << stats.prompt_tokens << " decode "
                             << stats.decode_tokens;
  }
  EXPECT_EQ(steps[0].first.shape.prompt_tokens, 150);
  EXPECT_NEAR(TestProfile().StepSeconds(steps[0].first.shape), 0.03 + 0.015, 1e-12);
  EXPECT_EQ(steps[1].first.shape.decode_tokens, 2);
  EXPECT_EQ(steps[1].first.shape.decode_context, 101 + 51);
  EXPECT_EQ((*engine)->pages().used_pages(), 0);
}

TEST(SimBackend, SlowFactorStretchesEveryStep) {
  auto engine = SimEngine(TestProfile(), nullptr, 3.0);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->Add(testing::Iota(10, 1), Greedy(2)).ok());
  for (const auto& [stats, seconds] : RunAll(**engine)) {
    EXPECT_GE(seconds, 3 * TestProfile().StepSeconds(stats.shape));
  }
}

// A real decode worker spends time between two decode steps (sending tokens): the profile's gap.
// The simulated step right after another waits it out; one after a prompt step, or after a pause
// longer than the gap, takes only its own time.
TEST(SimBackend, ADecodeStepRightAfterAnotherEndsAGapAfterIt) {
  // A gap far longer than a late wake-up on a loaded machine, so that a step that waited it
  // out and one that did not are told apart with room to spare.
  PerformanceProfile p = TestProfile();
  p.decode_gap_seconds = 0.5;
  auto engine = SimEngine(p);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->Add(testing::Iota(10, 1), Greedy(4)).ok());
  std::vector<TokenEvent> events;
  StepStats stats;
  auto step = [&] {
    const auto start = Clock::now();
    EXPECT_TRUE((*engine)->Step(&events, &stats).ok());
    return std::pair{start, Clock::now()};
  };
  step();  // the prompt
  const auto [start1, end1] = step();
  ASSERT_EQ(stats.shape.decode_tokens, 1);
  const double one = p.StepSeconds(stats.shape);
  EXPECT_LT(Seconds(end1 - start1), one + 0.25) << "a decode step after a prompt step";
  const auto [start2, end2] = step();
  // The gap counts from the previous step's planned end, at least `one` after start1 (a wake-up
  // late under load moves end1, not the plan).
  EXPECT_GE(Seconds(end2 - start1), one + p.decode_gap_seconds + one);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const auto [start3, end3] = step();
  EXPECT_GE(Seconds(end3 - start3), one);
  EXPECT_LT(Seconds(end3 - start3), one + 0.25) << "a decode step after a pause";
  EXPECT_FALSE((*engine)->HasWork());
}

// With a spread, each step's time is the profile's times a factor drawn from it: never below its
// least factor, never above its greatest (plus bookkeeping), and not all alike.
TEST(SimBackend, AStepsTimeIsDrawnFromTheProfilesSpread) {
  PerformanceProfile p = TestProfile();
  p.decode_spread = {0.5, 1.0, 2.0};
  auto engine = SimEngine(p);
  ASSERT_TRUE(engine.ok());
  ASSERT_TRUE((*engine)->Add(testing::Iota(10, 1), Greedy(25)).ok());
  std::vector<double> factors;
  for (const auto& [stats, seconds] : RunAll(**engine)) {
    if (stats.shape.prompt_tokens > 0) {
      EXPECT_GE(seconds, p.StepSeconds(stats.shape)) << "no prefill spread: as predicted";
      continue;
    }
    const double want = p.StepSeconds(stats.shape);
    EXPECT_GE(seconds, 0.5 * want);
    EXPECT_LT(seconds, 2.0 * want + 0.1);  // bookkeeping and late wake-ups on top
    factors.push_back(seconds / want);
  }
  ASSERT_EQ(factors.size(), 24u);
  const auto [least, most] = std::minmax_element(factors.begin(), factors.end());
  EXPECT_LT(*least, 0.9);
  EXPECT_GT(*most, 1.2);
}

TEST(SimBackend, LayerHooksComeInOrderThroughTheStep) {
  PerformanceProfile p = TestProfile();
  p.prefill = {0.1, 0, 0};
  auto engine = SimEngine(p);
  ASSERT_TRUE(engine.ok());
  std::vector<std::pair<int, double>> hooks;
  const auto start = Clock::now();
  (*engine)->set_layer_hook([&](int layer, std::span<const PromptDone> done) {
    EXPECT_EQ(done.size(), 1u);
    hooks.push_back({layer, Seconds(Clock::now() - start)});
  });
  ASSERT_TRUE((*engine)->Add(testing::Iota(20, 1), Greedy(1), /*keep_pages=*/true).ok());
  std::vector<TokenEvent> events;
  ASSERT_TRUE((*engine)->Step(&events).ok());
  ASSERT_EQ(hooks.size(), 2u);  // SmallConfig has two layers
  EXPECT_EQ(hooks[0].first, 0);
  EXPECT_EQ(hooks[1].first, 1);
  EXPECT_GE(hooks[0].second, 0.05);  // half way through a 100 ms step
  EXPECT_LT(hooks[0].second, 0.1);
  EXPECT_GE(hooks[1].second, 0.1);
  (*engine)->pages().Free((*engine)->TakeKeptPages(events[0].seq_id));
}

TEST(SimBackend, TokensAreFixedByThePromptAndIgnoreSamplingAndBatching) {
  auto tokens_of = [](std::vector<std::vector<int32_t>> prompts, bool sampled) {
    auto engine = SimEngine(PerformanceProfile::Zero());
    EXPECT_TRUE(engine.ok());
    std::map<uint64_t, std::vector<int32_t>> by_seq;
    std::vector<uint64_t> ids;
    for (auto& prompt : prompts) {
      SamplingParams s = Greedy(16);
      if (sampled) {
        s.temperature = 0.8;
        s.seed = 42;
      }
      ids.push_back(*(*engine)->Add(prompt, s));
    }
    std::vector<TokenEvent> events;
    RunAll(**engine, &events);
    for (const auto& e : events) by_seq[e.seq_id].push_back(e.token);
    std::vector<std::vector<int32_t>> out;
    for (uint64_t id : ids) out.push_back(by_seq[id]);
    return out;
  };
  const auto alone = tokens_of({testing::Iota(30, 5)}, false);
  const auto batched = tokens_of({testing::Iota(7, 2), testing::Iota(30, 5)}, false);
  const auto sampled = tokens_of({testing::Iota(30, 5)}, true);
  ASSERT_EQ(alone[0].size(), 16u);
  EXPECT_EQ(batched[1], alone[0]);
  EXPECT_EQ(sampled[0], alone[0]);
  EXPECT_NE(batched[0], alone[0]);
  for (int32_t t : alone[0]) EXPECT_LT(t, testing::SmallConfig().vocab_size);
}

TEST(SimBackend, KvIsOneValueATokenAndSaysWhatTheRealBytesWeigh) {
  SimBackendOptions o;
  o.profile = TestProfile();
  auto backend = CreateSimBackend(testing::SmallConfig(), o);
  ASSERT_TRUE(backend.ok());
  const KvCacheShape& shape = (*backend)->kv_shape();
  EXPECT_EQ(shape.n_layers, 2);
  EXPECT_EQ(shape.kv_dim(), 1);
  EXPECT_EQ(shape.num_pages, 64);
  ASSERT_NE((*backend)->simulated_kv(), nullptr);
  EXPECT_EQ((*backend)->simulated_kv()->bytes_per_token_layer, 1024.0 / 2);
  EXPECT_EQ((*backend)->simulated_kv()->bytes_per_second, 1e9);
  EXPECT_EQ((*backend)->device(), "sim:test");
  // The pool is writable where a transfer would write.
  auto* first = static_cast<float*>((*backend)->KvLayerData(1));
  first[shape.layer_elems() - 1] = 1.0f;
}

TEST(SimBackend, RefusesAProfileOfAnotherShapeAndBadBatches) {
  SimBackendOptions o;
  o.profile = TestProfile();
  o.profile.model_shape = {{"num_hidden_layers", 32}};
  auto refused = CreateSimBackend(testing::SmallConfig(), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("num_hidden_layers 32"), std::string::npos);
  o.profile.model_shape = nlohmann::json::object();
  o.slow_factor = 0;
  EXPECT_FALSE(CreateSimBackend(testing::SmallConfig(), o).ok());

  o.slow_factor = 1;
  auto backend = CreateSimBackend(testing::SmallConfig(), o);
  ASSERT_TRUE(backend.ok());
  const std::vector<int32_t> tokens = {1, 100000};
  const std::vector<int32_t> pages = {0};
  ForwardBatch batch;
  batch.chunks.push_back({tokens, 0, pages, true});
  std::vector<int32_t> out;
  EXPECT_FALSE((*backend)->ForwardGreedy(batch, &out).ok());  // a token outside the vocabulary
}

TEST(SimBackend, FaultsFailOrFreezeSteps) {
  auto faults = std::make_shared<SimFaults>();
  faults->fail_at = Clock::now();
  auto failing = SimEngine(PerformanceProfile::Zero(), faults);
  ASSERT_TRUE(failing.ok());
  ASSERT_TRUE((*failing)->Add(testing::Iota(5, 1), Greedy(2)).ok());
  std::vector<TokenEvent> events;
  Status s = (*failing)->Step(&events);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();

  auto freezing = std::make_shared<SimFaults>();
  freezing->freeze_at = Clock::now();
  auto frozen = SimEngine(PerformanceProfile::Zero(), freezing);
  ASSERT_TRUE(frozen.ok());
  ASSERT_TRUE((*frozen)->Add(testing::Iota(5, 1), Greedy(2)).ok());
  std::atomic<bool> returned{false};
  std::thread step([&] {
    std::vector<TokenEvent> ev;
    EXPECT_FALSE((*frozen)->Step(&ev).ok());
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(returned);  // frozen until released
  freezing->Release();
  step.join();
  EXPECT_TRUE(returned);
}

}  // namespace
}  // namespace pdserve::model
