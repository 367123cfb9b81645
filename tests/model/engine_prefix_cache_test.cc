// The engine's prefix cache on the tiny preset: multi-turn conversations give the same tokens with
// the cache on as off (greedy and seeded, roomy and under eviction and preemption) while running
// fewer prompt tokens; sequences sharing a prefix share its pages; idle cached pages go least
// recently used first; a preempted sequence's blocks are found again; KV events come in order;
// the decode worker's flow (query, pin, AddPrefilled) works; and with the cache off nothing is
// kept.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "model/engine.h"
#include "model/model_maker.h"
#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

using testing::RandomTokens;
using testing::TempDir;

struct ConversationRun {
  std::vector<std::vector<int32_t>> answers;  // [conversation * turns + turn]
  int64_t prompt_tokens_run = 0;              // prompt work over every step
  int64_t evicted_blocks = 0;                 // blocks removed, from the KV events
  std::vector<int> cached_tokens;             // TokenEvent::cached_tokens per answer
};

class EnginePrefixCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MakeModelOptions o;
    o.preset = "tiny";
    o.out_dir = dir_.path();
    Status made = MakeModel(o);
    ASSERT_TRUE(made.ok()) << made.ToString();
  }

  struct Options {
    bool prefix_cache = true;
    int num_pages = 1024;
    int page_size = 8;
    int max_batch_tokens = 2048;
    int kv_lookahead_tokens = 16;
    std::string device = "cpu";
  };
  std::unique_ptr<Engine> MakeEngine(const Options& opt) {
    EngineOptions o;
    o.device = opt.device;
    o.prefix_cache = opt.prefix_cache;
    o.cache_salt = 0x5eed;
    o.page_size = opt.page_size;
    o.num_pages = opt.num_pages;
    o.max_batch_tokens = opt.max_batch_tokens;
    o.kv_lookahead_tokens = opt.kv_lookahead_tokens;
    o.threads = 2;
    auto e = Engine::Load(dir_.path(), o);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }

  static SamplingParams Params(int max_tokens, float temperature = 0, uint64_t seed = 0) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = seed;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
  }

  // Runs every queued sequence to its end; the tokens of each, in order.
  static std::map<uint64_t, std::vector<int32_t>> RunAll(
      Engine& e, ConversationRun* run = nullptr, std::map<uint64_t, int>* cached = nullptr) {
    std::map<uint64_t, std::vector<int32_t>> out;
    std::vector<TokenEvent> events;
    for (int steps = 0; e.HasWork() && steps < 100000; ++steps) {
      events.clear();
      StepStats stats;
      EXPECT_TRUE(e.Step(&events, &stats).ok());
      if (run) run->prompt_tokens_run += stats.prompt_tokens;
      for (const auto& ev : events) {
        if (ev.token >= 0) out[ev.seq_id].push_back(ev.token);
        if (cached && out[ev.seq_id].size() == 1) (*cached)[ev.seq_id] = ev.cached_tokens;
      }
      if (run) {
        for (const auto& k : e.TakeKvEvents()) run->evicted_blocks += k.removed.size();
      }
    }
    return out;
  }

  // `conversations` conversations of `turns` turns, all turns k at once: turn k's prompt is turn
  // k-1's prompt, its answer and new user tokens; every conversation opens with a shared system
  // prompt. Seeded by conversation and turn when sampled.
  static ConversationRun RunConversations(Engine& e, int conversations, int turns,
                                          float temperature) {
    const int vocab = e.config().vocab_size;
    const std::vector<int32_t> system = RandomTokens(21, vocab, 1);
    std::vector<std::vector<int32_t>> history(conversations, system);
    ConversationRun run;
    run.answers.resize(static_cast<size_t>(conversations) * turns);
    run.cached_tokens.resize(run.answers.size());
    for (int turn = 0; turn < turns; ++turn) {
      std::map<uint64_t, int> index;
      for (int c = 0; c < conversations; ++c) {
        const auto user = RandomTokens(5 + (c + turn) % 9, vocab, 100 * c + turn + 7);
        history[c].insert(history[c].end(), user.begin(), user.end());
        auto seq = e.Add(history[c], Params(6 + (c % 5) * 4, temperature, 1000 * c + turn));
        EXPECT_TRUE(seq.ok()) << seq.status().ToString();
        index[*seq] = c;
      }
      std::map<uint64_t, int> cached;
      for (auto& [seq, tokens] : RunAll(e, &run, &cached)) {
        const int c = index[seq];
        run.answers[c * turns + turn] = tokens;
        run.cached_tokens[c * turns + turn] = cached[seq];
        history[c].insert(history[c].end(), tokens.begin(), tokens.end());
      }
    }
    return run;
  }

  TempDir dir_;
};

// The identity check on the engine: 20 conversations of 4 turns.
TEST_F(EnginePrefixCacheTest, MultiTurnConversationsGiveTheSameTokensWithTheCacheOnAsOff) {
  constexpr int kConversations = 20, kTurns = 4;
  for (const float temperature : {0.0f, 0.8f}) {
    auto off = MakeEngine({.prefix_cache = false});
    const ConversationRun expected = RunConversations(*off, kConversations, kTurns, temperature);
    EXPECT_EQ(off->prefix_cache_hits(), 0);
    EXPECT_EQ(off->pages().cached_pages(), 0);

    auto on = MakeEngine({});
    const ConversationRun got = RunConversations(*on, kConversations, kTurns, temperature);
    EXPECT_EQ(got.answers, expected.answers) << "temperature " << temperature;
    EXPECT_GT(on->prefix_cache_hits(), 0);
    EXPECT_EQ(on->prefix_cache_queries(), expected.prompt_tokens_run);
    // What the cache found is exactly the prompt work skipped.
    EXPECT_EQ(got.prompt_tokens_run, expected.prompt_tokens_run - on->prefix_cache_hits());
    int64_t reported = 0;
    for (int i = 0; i < kConversations * kTurns; ++i) {
      reported += got.cached_tokens[i];
      if (i % kTurns > 0) {
        EXPECT_GT(got.cached_tokens[i], 0) << "answer " << i;
      }
    }
    EXPECT_EQ(reported, on->prefix_cache_hits());
    EXPECT_EQ(on->pages().used_pages(), 0);

    // A pool a fraction of the conversations' size: cached blocks are evicted and sequences
    // preempted, prefills chunked, and still every token is the same.
    auto tight = MakeEngine({.num_pages = 32, .max_batch_tokens = 37, .kv_lookahead_tokens = 1});
    const ConversationRun squeezed = RunConversations(*tight, kConversations, kTurns, temperature);
    EXPECT_EQ(squeezed.answers, expected.answers) << "temperature " << temperature;
    EXPECT_GT(squeezed.evicted_blocks, 0);
    EXPECT_GT(tight->num_preemptions(), 0);
    EXPECT_GT(tight->prefix_cache_hits(), 0);
    EXPECT_EQ(tight->pages().used_pages(), 0);
  }
}

// On a GPU the same check, cache on against off on the device itself (scripts/gpu-check).
TEST_F(EnginePrefixCacheTest, MultiTurnIdentityOnCuda) {
  EngineOptions probe;
  probe.device = "cuda:0";
  probe.num_pages = 16;
  if (auto e = Engine::Load(dir_.path(), probe); !e.ok()) {
    GTEST_SKIP() << "no CUDA engine here: " << e.status().ToString();
  }
  auto off = MakeEngine({.prefix_cache = false, .device = "cuda:0"});
  auto on = MakeEngine({.device = "cuda:0"});
  ASSERT_TRUE(off && on);
  for (const float temperature : {0.0f, 0.8f}) {
    const auto expected = RunConversations(*off, 20, 4, temperature);
    EXPECT_EQ(RunConversations(*on, 20, 4, temperature).answers, expected.answers);
  }
  EXPECT_GT(on->prefix_cache_hits(), 0);
}

// Sequences started after another cached their common prefix read the same pages, a prompt
// that is all cached blocks still computes its last block, and a page one sequence still holds is
// never handed out when the others end.
TEST_F(EnginePrefixCacheTest, SequencesSharingAPrefixSharePagesWhileReferenced) {
  auto e = MakeEngine({.num_pages = 16});
  const int vocab = e->config().vocab_size;
  const std::vector<int32_t> prefix = RandomTokens(24, vocab, 3);  // three full pages of 8
  ASSERT_TRUE(e->Add(prefix, Params(1)).ok());
  RunAll(*e);
  EXPECT_EQ(e->pages().cached_pages(), 3);
  std::vector<int32_t> a = prefix, b = prefix;
  a.insert(a.end(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  b.insert(b.end(), {11, 12, 13, 14, 15, 16, 17, 18, 19});
  auto sa = e->Add(a, Params(1), /*keep_pages=*/true);
  auto sb = e->Add(b, Params(1), /*keep_pages=*/true);
  auto sc = e->Add(prefix, Params(1), /*keep_pages=*/true);
  ASSERT_TRUE(sa.ok() && sb.ok() && sc.ok());
  StepStats stats;
  std::vector<TokenEvent> events;
  ASSERT_TRUE(e->Step(&events, &stats).ok());
  EXPECT_EQ(stats.prompt_tokens, 10 + 9 + 8);  // the prefix again: its last block is computed
  EXPECT_EQ(e->prefix_cache_hits(), 24 + 24 + 16);
  const auto pa = e->TakeKeptPages(*sa), pb = e->TakeKeptPages(*sb), pc = e->TakeKeptPages(*sc);
  ASSERT_EQ(pa.size(), 5u);
  ASSERT_EQ(pb.size(), 5u);
  ASSERT_EQ(pc.size(), 4u);
  EXPECT_EQ(std::vector<int32_t>(pa.begin(), pa.begin() + 3),
            std::vector<int32_t>(pb.begin(), pb.begin() + 3));
  EXPECT_EQ(std::vector<int32_t>(pa.begin(), pa.begin() + 2),
            std::vector<int32_t>(pc.begin(), pc.begin() + 2));
  EXPECT_NE(pc[2], pa[2]);  // computed again on a page of its own
  EXPECT_EQ(e->pages().used_pages(), 3 + 2 + 2 + 2);

  e->pages().Free(pa);
  e->pages().Free(pc);
  auto all = e->pages().Allocate(e->pages().free_pages());  // evicts every idle cached page
  ASSERT_TRUE(all.ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(std::count(all->begin(), all->end(), pb[i]), 0) << i;
  EXPECT_EQ(e->pages().MatchPrefix(e->BlockKeys(b)), 4);  // b's blocks are still cached
  EXPECT_EQ(e->pages().MatchPrefix(e->BlockKeys(a)), 3);
  e->pages().Free(*all);
  e->pages().Free(pb);
  EXPECT_EQ(e->pages().used_pages(), 0);
}

// Idle cached pages go least recently used first when a sequence needs pages: a prompt used
// again outlives one used once after it, and a query after the eviction misses.
TEST_F(EnginePrefixCacheTest, IdleCachedPagesAreEvictedLeastRecentlyUsedFirst) {
  auto e = MakeEngine({.num_pages = 12});  // a sequence of 33 + 1 tokens takes 5 pages
  const int vocab = e->config().vocab_size;
  const auto a = RandomTokens(33, vocab, 10), b = RandomTokens(33, vocab, 11),
             c = RandomTokens(33, vocab, 12);
  for (const auto* prompt : {&a, &b, &a, &c}) {
    ASSERT_TRUE(e->Add(*prompt, Params(1)).ok());
    RunAll(*e);
  }
  EXPECT_EQ(e->prefix_cache_hits(), 32);  // a's second run found its four blocks
  EXPECT_EQ(e->pages().MatchPrefix(e->BlockKeys(a)), 4);
  EXPECT_EQ(e->pages().MatchPrefix(e->BlockKeys(b)), 3);  // its last block made room for c
  EXPECT_EQ(e->pages().MatchPrefix(e->BlockKeys(c)), 4);
  ASSERT_TRUE(e->Add(b, Params(1)).ok());
  RunAll(*e);
  EXPECT_EQ(e->prefix_cache_hits(), 32 + 24);
}

// A sequence preempted to recompute leaves its full blocks cached, and readmitted it finds them.
TEST_F(EnginePrefixCacheTest, PreemptedSequencesBlocksBecomeCacheAndReadmissionFindsThem) {
  auto tight = MakeEngine({.num_pages = 12, .kv_lookahead_tokens = 4});
  auto roomy = MakeEngine({.prefix_cache = false});
  const int vocab = tight->config().vocab_size;
  for (Engine* e : {tight.get(), roomy.get()}) {
    for (int i = 0; i < 2; ++i)
      ASSERT_TRUE(e->Add(RandomTokens(20, vocab, 40 + i), Params(40)).ok());
  }
  std::map<uint64_t, std::vector<int32_t>> out;
  std::vector<TokenEvent> events;
  int idle_after_preemption = -1;
  while (tight->HasWork()) {
    const int64_t before = tight->num_preemptions();
    events.clear();
    ASSERT_TRUE(tight->Step(&events).ok());
    for (const auto& ev : events) out[ev.seq_id].push_back(ev.token);
    if (before == 0 && tight->num_preemptions() == 1) {
      idle_after_preemption = tight->pages().idle_cached_pages();
    }
  }
  ASSERT_GT(tight->num_preemptions(), 0);
  EXPECT_GT(idle_after_preemption, 0);
  EXPECT_GT(tight->prefix_cache_hits(), 0);  // distinct prompts: only readmission can hit
  EXPECT_EQ(out, RunAll(*roomy));
  EXPECT_EQ(tight->pages().used_pages(), 0);
}

// Events number 1, 2, 3, ...; a prompt's blocks are stored in order, each with its parent, then
// removed when evicted; the snapshot is what the events add up to.
TEST_F(EnginePrefixCacheTest, KvEventsAreOrderedStoredThenRemovedAndAddUpToTheSnapshot) {
  auto e = MakeEngine({.num_pages = 8});
  const int vocab = e->config().vocab_size;
  const auto a = RandomTokens(41, vocab, 20), b = RandomTokens(57, vocab, 21);
  ASSERT_TRUE(e->Add(a, Params(1)).ok());
  RunAll(*e);
  ASSERT_TRUE(e->Add(b, Params(1)).ok());  // all 8 pages: a's 5 cached blocks must go
  RunAll(*e);
  const auto events = e->TakeKvEvents();
  ASSERT_FALSE(events.empty());
  std::vector<BlockKey> stored;
  std::set<BlockKey> held;
  size_t first_removal = events.size();
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].seq, i + 1);
    EXPECT_TRUE(events[i].stored.empty() != events[i].removed.empty());
    for (const auto& s : events[i].stored) {
      EXPECT_EQ(s.parent, stored.empty() || stored.size() == 5 ? 0 : stored.back());
      stored.push_back(s.key);
      held.insert(s.key);
    }
    for (BlockKey k : events[i].removed) {
      EXPECT_EQ(held.erase(k), 1u) << "removed before stored";
      first_removal = std::min(first_removal, i);
    }
  }
  std::vector<BlockKey> want = e->BlockKeys(a);
  const auto bk = e->BlockKeys(b);
  want.insert(want.end(), bk.begin(), bk.end());
  EXPECT_EQ(stored, want);
  ASSERT_LT(first_removal, events.size());
  EXPECT_EQ(e->pages().MatchPrefix(e->BlockKeys(a)), 0);
  const KvCacheSnapshot snap = e->CachedBlocks();
  EXPECT_EQ(snap.seq, events.back().seq);
  EXPECT_EQ(std::set<BlockKey>(snap.blocks.begin(), snap.blocks.end()), held);
  EXPECT_TRUE(e->TakeKvEvents().empty());
}

// A decode worker holding a prompt's prefix receives only the rest: it pins the held blocks,
// allocates pages for the others, and AddPrefilled decodes to one engine's tokens; the
// prompt's blocks are cached when it has run, and a prefill engine's kept pages stay cached.
TEST_F(EnginePrefixCacheTest, DecodeWorkerPinsHeldBlocksAndAddPrefilledCachesThePrompt) {
  auto whole = MakeEngine({});
  auto prefill = MakeEngine({});
  auto decode = MakeEngine({});
  const int vocab = whole->config().vocab_size;
  const auto first_turn = RandomTokens(19, vocab, 30);
  auto prompt = first_turn;
  for (int32_t t : RandomTokens(22, vocab, 31)) prompt.push_back(t);  // 41 tokens: 5 blocks
  const SamplingParams p = Params(10, 0.8f, 9);
  ASSERT_TRUE(whole->Add(prompt, p).ok());
  const std::vector<int32_t> expected = RunAll(*whole).begin()->second;

  ASSERT_TRUE(decode->Add(first_turn, Params(1)).ok());  // the decode engine holds 2 blocks
  RunAll(*decode);
  SamplingParams first = p;
  first.max_tokens = 1;
  auto seq = prefill->Add(prompt, first, /*keep_pages=*/true);
  ASSERT_TRUE(seq.ok());
  const int32_t first_token = RunAll(*prefill).begin()->second[0];
  ASSERT_EQ(first_token, expected[0]);
  const auto src = prefill->TakeKeptPages(*seq);
  EXPECT_EQ(prefill->pages().cached_pages(), 5);

  const auto keys = decode->BlockKeys(prompt);
  ASSERT_EQ(keys, prefill->BlockKeys(prompt));  // same salt and page size: same keys
  const int held = decode->pages().MatchPrefix(keys);
  EXPECT_EQ(held, 2);
  std::vector<int32_t> pages = decode->pages().AcquirePrefix(std::span(keys).first(held));
  const int needed = PagesForTokens(decode->InitialKvTokens(41, p.max_tokens), 8);
  auto rest = decode->pages().Allocate(needed - held);
  ASSERT_TRUE(rest.ok());
  pages.insert(pages.end(), rest->begin(), rest->end());
  const KvCacheShape& shape = prefill->backend().kv_shape();
  const size_t page_bytes = shape.page_elems() * DTypeSize(shape.dtype);
  for (int l = 0; l < prefill->config().n_layers; ++l) {  // what the KV transfer sends
    auto* from = static_cast<char*>(prefill->backend().KvLayerData(l));
    auto* to = static_cast<char*>(decode->backend().KvLayerData(l));
    for (int k = held; k < PagesForTokens(41, 8); ++k) {
      std::memcpy(to + pages[k] * page_bytes, from + src[k] * page_bytes, page_bytes);
    }
  }
  prefill->pages().Free(src);
  EXPECT_EQ(prefill->pages().free_pages(), prefill->pages().num_pages());
  EXPECT_EQ(prefill->pages().idle_cached_pages(), 5);

  ASSERT_TRUE(decode->AddPrefilled(prompt, first_token, pages, p).ok());
  std::vector<int32_t> got = {first_token};
  const auto rest_tokens = RunAll(*decode).begin()->second;
  got.insert(got.end(), rest_tokens.begin(), rest_tokens.end());
  EXPECT_EQ(got, expected);
  EXPECT_EQ(decode->pages().MatchPrefix(keys), 5);
  EXPECT_EQ(decode->pages().used_pages(), 0);
}

// With the cache off the engine keeps nothing: a prompt run twice runs all of it twice, the
// pool holds no cached page and records no event, and the counters stay at zero.
TEST_F(EnginePrefixCacheTest, CacheOffKeepsNothingAndRunsEveryPromptToken) {
  for (const bool cache : {false, true}) {
    auto e = MakeEngine({.prefix_cache = cache, .num_pages = 64});
    const auto prompt = RandomTokens(40, e->config().vocab_size, 50);
    ConversationRun run;
    std::vector<std::vector<int32_t>> outs;
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(e->Add(prompt, Params(4)).ok());
      outs.push_back(RunAll(*e, &run).begin()->second);
    }
    EXPECT_EQ(outs[0], outs[1]);
    EXPECT_EQ(e->pages().used_pages(), 0);
    EXPECT_EQ(e->pages().free_pages(), 64);
    if (cache) {  // the same check fails with the cache on
      EXPECT_EQ(run.prompt_tokens_run, 40 + 8);
      EXPECT_GT(e->pages().cached_pages(), 0);
      continue;
    }
    EXPECT_EQ(run.prompt_tokens_run, 80);
    EXPECT_EQ(e->pages().cached_pages(), 0);
    EXPECT_TRUE(e->TakeKvEvents().empty());
    EXPECT_EQ(e->CachedBlocks().seq, 0u);
    EXPECT_EQ(e->prefix_cache_queries(), 0);
    EXPECT_EQ(e->prefix_cache_hits(), 0);
  }
}

}  // namespace
}  // namespace pdserve::model
