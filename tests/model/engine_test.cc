// The engine's scheduling: continuous batching, chunked prefill, admission by free pages,
// stop conditions and cancel, and that none of it changes greedy tokens.
#include "model/engine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

#include "model/cpu_backend.h"
#include "model/weights.h"
#include "tests/fakes/fake_backend.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using testing::SmallConfig;
using testing::TempDir;
using testing::WriteModel;

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { WriteModel(SmallConfig(), dir_.path()); }

  std::unique_ptr<Engine> MakeEngine(
      int max_batch_tokens = 2048, int num_pages = 256, int max_running = 64,
      int kv_lookahead_tokens = 16,
      EngineOptions::Preemption preemption = EngineOptions::Preemption::kRecompute) {
    EngineOptions o;
    o.kv_lookahead_tokens = kv_lookahead_tokens;
    o.preemption = preemption;
    o.page_size = 4;
    o.num_pages = num_pages;
    o.max_batch_tokens = max_batch_tokens;
    o.max_running = max_running;
    o.threads = 2;
    auto e = Engine::Load(dir_.path(), o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return std::move(e).value();
  }

  static std::vector<int32_t> Prompt(int i) {
    std::mt19937 rng(1000 + i);
    std::vector<int32_t> p(3 + (i * 7) % 29);
    for (auto& t : p) t = static_cast<int32_t>(rng() % 96);
    return p;
  }

  // Runs every prompt to the end; returns the generated tokens per prompt index.
  static std::map<int, std::vector<int32_t>> RunAll(Engine& e, int n, int max_tokens,
                                                    std::map<int, FinishReason>* finish = nullptr) {
    std::map<uint64_t, int> index;
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    for (int i = 0; i < n; ++i) index[*e.Add(Prompt(i), p)] = i;
    std::map<int, std::vector<int32_t>> out;
    std::vector<TokenEvent> events;
    for (int steps = 0; e.HasWork() && steps < 10000; ++steps) {
      events.clear();
      EXPECT_TRUE(e.Step(&events).ok());
      for (const auto& ev : events) {
        out[index[ev.seq_id]].push_back(ev.token);
        if (finish && ev.finish != FinishReason::kNone) (*finish)[index[ev.seq_id]] = ev.finish;
      }
    }
    return out;
  }

  TempDir dir_;
};

TEST_F(EngineTest, GreedyTokensDoNotDependOnBatchingOrChunking) {
  std::map<int, std::vector<int32_t>> alone;
  for (int i = 0; i < 6; ++i) {
    auto e = MakeEngine();
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 12;
    ASSERT_TRUE(e->Add(Prompt(i), p).ok());
    std::vector<TokenEvent> events;
    while (e->HasWork()) ASSERT_TRUE(e->Step(&events).ok());
    for (const auto& ev : events) alone[i].push_back(ev.token);
  }
  auto together = MakeEngine();
  EXPECT_EQ(RunAll(*together, 6, 12), alone);
  auto chunked = MakeEngine(/*max_batch_tokens=*/5);
  EXPECT_EQ(RunAll(*chunked, 6, 12), alone);
  auto few_slots = MakeEngine(2048, 256, /*max_running=*/2);
  EXPECT_EQ(RunAll(*few_slots, 6, 12), alone);
  EXPECT_EQ(few_slots->pages().used_pages(), 0);
}

TEST_F(EngineTest, ConvertedMatricesServeBatchInvariantlyAndCloseToTheCheckpoint) {
  EngineOptions o;
  o.page_size = 4;
  o.num_pages = 256;
  o.threads = 2;
  auto f32 = Engine::Load(dir_.path(), o);
  o.dtype = "bf16";
  auto bf16 = Engine::Load(dir_.path(), o);
  ASSERT_TRUE(f32.ok()) << f32.status().ToString();
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();

  // A prompt's logits stay within bf16's precision of the f32 checkpoint's.
  const std::vector<int32_t> prompt = Prompt(1), pages = {0, 1, 2};
  ForwardBatch batch;
  batch.chunks.push_back({prompt, 0, pages, true});
  std::vector<float> a, b;
  ASSERT_TRUE((*f32)->backend().Forward(batch, &a).ok());
  ASSERT_TRUE((*bf16)->backend().Forward(batch, &b).ok());
  ASSERT_EQ(a.size(), b.size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    norm += a[i] * static_cast<double>(a[i]);
  }
  EXPECT_LT(std::sqrt(err / norm), 2e-2);
  EXPECT_GT(err, 0.0);  // the matrices really were rounded

  // The bf16 kernels keep batch invariance: six prompts together give each its tokens alone.
  std::map<int, std::vector<int32_t>> alone;
  for (int i = 0; i < 6; ++i) {
    auto e = Engine::Load(dir_.path(), o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 8;
    ASSERT_TRUE((*e)->Add(Prompt(i), p).ok());
    std::vector<TokenEvent> events;
    while ((*e)->HasWork()) ASSERT_TRUE((*e)->Step(&events).ok());
    for (const auto& ev : events) alone[i].push_back(ev.token);
  }
  EXPECT_EQ(RunAll(**bf16, 6, 8), alone);
}

TEST_F(EngineTest, RefusesUnknownDtypesAndNonBf16OnAGpu) {
  EngineOptions o;
  o.num_pages = 16;
  o.dtype = "q4";
  auto unknown = Engine::Load(dir_.path(), o);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("'q4'"), std::string::npos);
  o.dtype = "f32";
  o.device = "cuda:0";
  auto gpu = Engine::Load(dir_.path(), o);
  ASSERT_FALSE(gpu.ok());
  EXPECT_NE(gpu.status().message().find("bf16"), std::string::npos) << gpu.status().ToString();
}

TEST_F(EngineTest, AdmissionWaitsForPagesAndEveryPageComesBack) {
  // Each request reserves ceil((prompt + 8) / 4) pages; 12 pages fit one or two at a time.
  auto e = MakeEngine(2048, /*num_pages=*/12);
  std::map<int, FinishReason> finish;
  auto out = RunAll(*e, 8, 8, &finish);
  EXPECT_EQ(out.size(), 8u);
  for (const auto& [i, tokens] : out) {
    EXPECT_EQ(tokens.size(), 8u) << i;
    EXPECT_EQ(finish[i], FinishReason::kLength);
  }
  EXPECT_EQ(e->pages().used_pages(), 0);
}

TEST_F(EngineTest, StopTokenEndsTheSequence) {
  auto e = MakeEngine();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 30;
  ASSERT_TRUE(e->Add(Prompt(1), p).ok());
  std::vector<TokenEvent> events;
  while (e->HasWork()) ASSERT_TRUE(e->Step(&events).ok());
  ASSERT_GE(events.size(), 3u);
  const int32_t third = events[2].token;

  auto again = MakeEngine();
  p.stop_token_ids = {third};
  ASSERT_TRUE(again->Add(Prompt(1), p).ok());
  std::vector<TokenEvent> stopped;
  while (again->HasWork()) ASSERT_TRUE(again->Step(&stopped).ok());
  int first_hit = 0;
  while (events[first_hit].token != third) ++first_hit;
  ASSERT_EQ(stopped.size(), static_cast<size_t>(first_hit + 1));
  EXPECT_TRUE(stopped.back().is_stop_token);
  EXPECT_EQ(stopped.back().finish, FinishReason::kStop);
  EXPECT_EQ(again->pages().used_pages(), 0);
}

TEST_F(EngineTest, CancelFreesPagesAndReportsCancelled) {
  auto e = MakeEngine();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 100;
  auto a = e->Add(Prompt(2), p);
  auto b = e->Add(Prompt(3), p);
  std::vector<TokenEvent> events;
  ASSERT_TRUE(e->Step(&events).ok());
  EXPECT_GT(e->pages().used_pages(), 0);
  e->Cancel(*a);
  e->Cancel(*b);
  events.clear();
  ASSERT_TRUE(e->Step(&events).ok());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].finish, FinishReason::kCancelled);
  EXPECT_FALSE(e->HasWork());
  EXPECT_EQ(e->pages().used_pages(), 0);
}

TEST_F(EngineTest, RefusesRequestsThatCanNeverRun) {
  auto e = MakeEngine(2048, /*num_pages=*/4);
  SamplingParams p;
  p.max_tokens = 100;  // needs more than 4 pages of 4 tokens
  EXPECT_EQ(e->Add(Prompt(0), p).status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(e->Add({}, SamplingParams{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e->Add({1, 2, 500}, SamplingParams{}).status().code(), StatusCode::kInvalidArgument);
  std::vector<int32_t> too_long(SmallConfig().max_seq_len, 1);
  EXPECT_EQ(e->Add(too_long, SamplingParams{}).status().code(), StatusCode::kOutOfRange);
  SamplingParams bad;
  bad.top_p = 2;
  EXPECT_EQ(e->Add({1}, bad).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, ContextEndStopsWithLength) {
  auto e = MakeEngine();
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 1000;
  std::vector<int32_t> prompt(SmallConfig().max_seq_len - 3, 5);
  ASSERT_TRUE(e->Add(prompt, p).ok());
  std::vector<TokenEvent> events;
  while (e->HasWork()) ASSERT_TRUE(e->Step(&events).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events.back().finish, FinishReason::kLength);
}

// max_tokens as large as a peer can send: the reservation is the context, not a sum that
// overflowed into a negative count of tokens (and 0 pages, which failed every sequence's step).
TEST_F(EngineTest, MaxTokensUpToInt32MaxReservesTheContextUpFrontOrTheLookaheadOnDemand) {
  for (const int lookahead : {0, 16}) {
    auto e = MakeEngine(2048, 256, 64, lookahead);
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = std::numeric_limits<int32_t>::max();
    ASSERT_TRUE(e->Add({1, 2, 3}, p).ok());
    std::vector<TokenEvent> events;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(e->Step(&events).ok());
    EXPECT_EQ(events.size(), 3u);
    EXPECT_EQ(e->pages().used_pages(),
              PagesForTokens(lookahead == 0 ? SmallConfig().max_seq_len : 3 + lookahead,
                             e->backend().kv_shape().page_size))
        << "lookahead " << lookahead;
  }
}

// A pool with room for about a quarter of what the sequences may use: the engine preempts the
// newest when a running sequence needs a page, recomputes them later, and every sequence's
// tokens are those it has alone, greedy or seeded.
TEST_F(EngineTest, KvOnDemandPreemptsTheNewestAndRecomputesToTheSameTokens) {
  constexpr int kSequences = 16, kMaxTokens = 24;
  for (const float temperature : {0.0f, 0.8f}) {
    auto run = [&](Engine& e) {
      std::map<uint64_t, int> index;
      for (int i = 0; i < kSequences; ++i) {
        SamplingParams p;
        p.temperature = temperature;
        p.seed = 100 + i;
        p.max_tokens = kMaxTokens;
        p.ignore_eos = true;
        index[*e.Add(Prompt(i), p)] = i;
      }
      std::map<int, std::vector<int32_t>> out;
      std::vector<TokenEvent> events;
      for (int steps = 0; e.HasWork() && steps < 20000; ++steps) {
        events.clear();
        EXPECT_TRUE(e.Step(&events).ok());
        for (const auto& ev : events) out[index[ev.seq_id]].push_back(ev.token);
      }
      return out;
    };
    auto roomy = MakeEngine(2048, 1024, 64, /*kv_lookahead_tokens=*/0);
    const auto expected = run(*roomy);
    int needed = 0;  // pages every sequence holds at its end
    for (int i = 0; i < kSequences; ++i) {
      needed += PagesForTokens(static_cast<int>(Prompt(i).size()) + kMaxTokens, 4);
    }
    auto tight = MakeEngine(2048, needed / 4, 64, /*kv_lookahead_tokens=*/4);
    EXPECT_EQ(run(*tight), expected) << "temperature " << temperature;
    EXPECT_GT(tight->num_preemptions(), 0);
    EXPECT_EQ(tight->pages().used_pages(), 0);
    EXPECT_EQ(roomy->num_preemptions(), 0);
  }
}

// A decode worker's engine hands a preempted sequence back (its owner resumes it elsewhere):
// the newest goes, with its pages, and the oldest keeps decoding.
TEST_F(EngineTest, HandBackPreemptionEndsTheNewestSequenceAndFreesItsPages) {
  auto e = MakeEngine(2048, /*num_pages=*/6, 64, /*kv_lookahead_tokens=*/4,
                      EngineOptions::Preemption::kHandBack);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 12;
  p.ignore_eos = true;
  std::vector<uint64_t> seqs;
  for (int i = 0; i < 2; ++i) {
    auto pages = e->pages().Allocate(1);
    ASSERT_TRUE(pages.ok());
    auto seq = e->AddPrefilled({1, 2, 3}, 5, *pages, p);  // 3 prompt tokens: one page
    ASSERT_TRUE(seq.ok()) << seq.status().ToString();
    seqs.push_back(*seq);
  }
  std::vector<TokenEvent> events;
  std::vector<uint64_t> preempted;
  std::map<uint64_t, int> tokens;
  while (e->HasWork()) {
    events.clear();
    ASSERT_TRUE(e->Step(&events).ok());
    for (const auto& ev : events) {
      if (ev.finish == FinishReason::kPreempted) {
        EXPECT_EQ(ev.token, -1);
        preempted.push_back(ev.seq_id);
      } else if (ev.token >= 0) {
        ++tokens[ev.seq_id];
      }
    }
  }
  // Each needs 4 pages by its end (3 + 12 tokens), 8 in all, of 6.
  EXPECT_EQ(preempted, std::vector<uint64_t>{seqs[1]});
  EXPECT_EQ(tokens[seqs[0]], 11);  // the first token came with it
  EXPECT_EQ(e->num_preemptions(), 1);
  EXPECT_EQ(e->pages().used_pages(), 0);
}

// Prefill in one engine, copy the KV pages into another engine's pages (what the KV transfer
// does), decode there: the tokens are those of one engine doing both, greedy and seeded.
TEST_F(EngineTest, PrefillInOneEngineDecodeInAnotherMatchesOneEngine) {
  for (const float temperature : {0.0f, 0.8f}) {
    for (int i = 0; i < 4; ++i) {
      SamplingParams p;
      p.temperature = temperature;
      p.seed = 7 + i;
      p.max_tokens = 10;
      p.ignore_eos = true;
      auto whole = MakeEngine();
      ASSERT_TRUE(whole->Add(Prompt(i), p).ok());
      std::vector<TokenEvent> events;
      while (whole->HasWork()) ASSERT_TRUE(whole->Step(&events).ok());
      std::vector<int32_t> expected;
      for (const auto& ev : events) expected.push_back(ev.token);

      // Prefill engine: one token, pages kept; the layer hook sees every layer once.
      auto prefill = MakeEngine(/*max_batch_tokens=*/5);  // several chunks for longer prompts
      std::vector<int> layers_seen;
      std::vector<int32_t> hooked_pages;
      prefill->set_layer_hook([&](int layer, std::span<const PromptDone> done) {
        ASSERT_EQ(done.size(), 1u);
        EXPECT_EQ(done[0].prompt_len, static_cast<int>(Prompt(i).size()));
        layers_seen.push_back(layer);
        hooked_pages.assign(done[0].pages.begin(), done[0].pages.end());
      });
      SamplingParams first = p;
      first.max_tokens = 1;
      auto seq = prefill->Add(Prompt(i), first, /*keep_pages=*/true);
      ASSERT_TRUE(seq.ok());
      events.clear();
      while (prefill->HasWork()) ASSERT_TRUE(prefill->Step(&events).ok());
      ASSERT_EQ(events.size(), 1u);
      const int32_t first_token = events[0].token;
      ASSERT_EQ(first_token, expected[0]);
      const int n_layers = prefill->config().n_layers;
      ASSERT_EQ(static_cast<int>(layers_seen.size()), n_layers);
      for (int l = 0; l < n_layers; ++l) EXPECT_EQ(layers_seen[l], l);
      std::vector<int32_t> src = prefill->TakeKeptPages(*seq);
      EXPECT_EQ(src, hooked_pages);
      EXPECT_TRUE(prefill->TakeKeptPages(*seq).empty());

      // Decode engine: pages reserved up front, KV copied page by page into them.
      auto decode = MakeEngine();
      const int page = 4;
      const int prompt_len = static_cast<int>(Prompt(i).size());
      auto dst = decode->pages().Allocate(PagesForTokens(prompt_len + p.max_tokens, page));
      ASSERT_TRUE(dst.ok());
      const KvCacheShape& shape = prefill->backend().kv_shape();
      const size_t page_bytes = shape.page_elems() * sizeof(float);
      for (int l = 0; l < n_layers; ++l) {
        auto* from = static_cast<char*>(prefill->backend().KvLayerData(l));
        auto* to = static_cast<char*>(decode->backend().KvLayerData(l));
        for (int k = 0; k < PagesForTokens(prompt_len, page); ++k) {
          std::memcpy(to + (*dst)[k] * page_bytes, from + src[k] * page_bytes, page_bytes);
        }
      }
      prefill->pages().Free(src);
      EXPECT_EQ(prefill->pages().free_pages(), prefill->pages().num_pages());
      ASSERT_TRUE(decode->AddPrefilled(Prompt(i), first_token, *dst, p).ok());
      std::vector<int32_t> got = {first_token};
      events.clear();
      while (decode->HasWork()) ASSERT_TRUE(decode->Step(&events).ok());
      for (const auto& ev : events) got.push_back(ev.token);
      EXPECT_EQ(got, expected) << "prompt " << i << " temperature " << temperature;
      EXPECT_EQ(decode->pages().free_pages(), decode->pages().num_pages());
    }
  }
}

TEST_F(EngineTest, PrefilledSequenceNeedsPagesForItsPromptOrItsWholeReservationUpFront) {
  auto on_demand = MakeEngine();
  SamplingParams q;
  q.temperature = 0;
  q.max_tokens = 20;
  auto one = on_demand->pages().Allocate(1);
  ASSERT_TRUE(one.ok());
  auto short_of_prompt = on_demand->AddPrefilled({1, 2, 3, 4, 5}, 7, *one, q);
  EXPECT_EQ(short_of_prompt.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(short_of_prompt.status().message().find("needs 2 pages for its prompt"),
            std::string::npos)
      << short_of_prompt.status().ToString();
  auto two = on_demand->pages().Allocate(2);
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(on_demand->AddPrefilled({1, 2, 3, 4, 5}, 7, *two, q).ok());
  on_demand->pages().Free(*one);

  auto e = MakeEngine(2048, 256, 64, /*kv_lookahead_tokens=*/0);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 20;
  auto pages = e->pages().Allocate(2);  // 8 tokens: far too few for 5 + 20
  ASSERT_TRUE(pages.ok());
  auto r = e->AddPrefilled({1, 2, 3, 4, 5}, 7, *pages, p);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("needs 7 pages"), std::string::npos) << r.status().ToString();
  e->pages().Free(*pages);
}

TEST_F(EngineTest, CancellingAWaitingPrefilledSequenceFreesItsPages) {
  auto e = MakeEngine(2048, 256, /*max_running=*/1);
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 4;
  auto busy = e->Add(Prompt(1), p);
  ASSERT_TRUE(busy.ok());
  std::vector<TokenEvent> events;
  ASSERT_TRUE(e->Step(&events).ok());  // the first sequence holds the only running slot
  auto pages = e->pages().Allocate(PagesForTokens(5 + 4, 4));
  ASSERT_TRUE(pages.ok());
  auto seq = e->AddPrefilled({1, 2, 3, 4, 5}, 7, *pages, p);
  ASSERT_TRUE(seq.ok());
  e->Cancel(*seq);
  e->Cancel(*busy);
  events.clear();
  while (e->HasWork()) ASSERT_TRUE(e->Step(&events).ok());
  EXPECT_EQ(e->pages().free_pages(), e->pages().num_pages());
}

// The engine asks the backend, not its type, whether greedy tokens are picked on the device:
// steps whose rows are all greedy go to ForwardGreedy, a step with a sampled row to Forward.
// The fake's next token is the last plus one, so the tokens say which path ran correctly.
TEST(EngineWithFakeBackendTest, AllGreedyStepsUseTheBackendsGreedyPathAndOthersForward) {
  ModelConfig c = SmallConfig();
  auto backend = std::make_unique<FakeBackend>(c, 64, 4);
  FakeBackend* fake = backend.get();
  EngineOptions o;
  o.page_size = 4;
  Engine engine(std::move(backend), o);
  SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_tokens = 4;
  auto a = engine.Add({10, 11, 12}, greedy);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<int32_t> tokens;
  while (engine.HasWork()) {
    std::vector<TokenEvent> events;
    ASSERT_TRUE(engine.Step(&events).ok());
    for (const auto& e : events) tokens.push_back(e.token);
  }
  EXPECT_EQ(tokens, (std::vector<int32_t>{13, 14, 15, 16}));
  EXPECT_EQ(fake->forward_calls(), 0);
  EXPECT_EQ(fake->greedy_calls(), 4);

  SamplingParams sampled;
  sampled.temperature = 0.5f;
  sampled.seed = 1;
  sampled.max_tokens = 2;
  ASSERT_TRUE(engine.Add({20, 21}, sampled).ok());
  ASSERT_TRUE(engine.Add({30}, greedy).ok());
  std::vector<TokenEvent> events;          // kept across steps: Step appends, and ends only its own
  ASSERT_TRUE(engine.Step(&events).ok());  // one step holds both: a sampled row goes to Forward
  EXPECT_EQ(fake->forward_calls(), 1);
  EXPECT_EQ(fake->greedy_calls(), 4);
  ASSERT_EQ(events.size(), 2u);
  // Its logits leave no choice: sampling picks the fake's next token too.
  for (const auto& e : events) EXPECT_TRUE(e.token == 22 || e.token == 31) << e.token;
  while (engine.HasWork()) ASSERT_TRUE(engine.Step(&events).ok());
  EXPECT_EQ(engine.pages().used_pages(), 0);
}

}  // namespace
}  // namespace pdserve::model
