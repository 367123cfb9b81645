// The routing policies against snapshots built here: which pair or colocated worker each picks,
// and what it must never pick (draining, excluded, another KV layout).
#include "router/routers.h"

#include <gtest/gtest.h>

#include <vector>

namespace pdserve::router {
namespace {

WorkerLoad Worker(uint64_t id, const std::string& role, int free_pages = 100, uint64_t layout = 7) {
  WorkerLoad w;
  w.id = id;
  w.role = role;
  w.layout_hash = layout;
  w.kv_pages = 1000;
  w.free_pages = free_pages;
  return w;
}

// Every attempt a pair (the default): what the tests of pair picking use; conditional placement
// is tested on its own below.
const PairRouting kPairs{.disaggregation = Disaggregation::kAlways};
const PairRouting kConditional{.disaggregation = Disaggregation::kConditional};

TEST(PdPairRouterTest, PicksTheDecodeWorkerWithTheMostRoomAndTheLeastQueuedPrefill) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode", 50), Worker(2, "decode", 80),
                                Worker(3, "prefill"), Worker(4, "prefill")};
  ws[2].sent_prompt_tokens = 500;
  ws[3].sent_prompt_tokens = 20;
  auto route = PdPairRouter(kPairs).Pick(ws, {});
  ASSERT_TRUE(route);
  EXPECT_EQ(route->decode_worker, 2u);
  EXPECT_EQ(route->prefill_worker, 4u);
  EXPECT_TRUE(route->disaggregated);
  // Equal free pages: the smaller batch (running plus routed attempts) wins.
  ws[0].free_pages = 80;
  ws[1].running = 3;
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, {})->decode_worker, 1u);
  // Equal queues: the first in the snapshot.
  ws[3].sent_prompt_tokens = 500;
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, {})->prefill_worker, 3u);
}

TEST(PdPairRouterTest, NeverPicksDrainingExcludedOrIncompatibleWorkers) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode", 90), Worker(2, "decode", 10),
                                Worker(3, "prefill", 100, /*layout=*/8), Worker(4, "prefill")};
  ws[0].draining = true;
  auto route = PdPairRouter(kPairs).Pick(ws, {});
  ASSERT_TRUE(route);
  EXPECT_EQ(route->decode_worker, 2u);
  EXPECT_EQ(route->prefill_worker, 4u);  // 3's KV layout differs from 2's
  RouteRequest request;
  request.exclude = {4};
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request))
      << "no prefill worker with decode 2's layout";
  request.exclude = {2};
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request))
      << "the only other decode worker is draining";
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(std::vector<WorkerLoad>{Worker(5, "both")}, {}));
}

TEST(PdPairRouterTest, ARequestPinnedToZonesGetsOnlyWorkersOfThem) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode", 90), Worker(2, "decode", 10),
                                Worker(3, "prefill"), Worker(4, "prefill"), Worker(5, "both", 99)};
  ws[0].zone = "us";
  ws[1].zone = "br";
  ws[2].zone = "us";
  ws[3].zone = "br";
  ws[4].zone = "us";
  RouteRequest br;
  br.zones = {"br"};
  auto route = PdPairRouter(kPairs).Pick(ws, br);
  ASSERT_TRUE(route);
  EXPECT_EQ(route->decode_worker, 2u);  // not 1, which has more room but is in us
  EXPECT_EQ(route->prefill_worker, 4u);
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, {})->decode_worker, 1u);  // unpinned: any zone
  RouteRequest nowhere;
  nowhere.zones = {"eu"};
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, nowhere));
  EXPECT_FALSE(ColocatedRouter().Pick(ws, br)) << "the only colocated worker is in us";
  RouteRequest us;
  us.zones = {"us", "eu"};
  EXPECT_EQ(ColocatedRouter().Pick(ws, us)->decode_worker, 5u);
}

TEST(PdPairRouterTest, ADecodeWorkerWithoutRoomForTheRequestsKvIsNotPicked) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode", 10), Worker(2, "decode", 12),
                                Worker(3, "prefill", 0)};
  for (auto& w : ws) w.page_size = 16;
  ws[1].pending_pages = 8;  // 12 free, 8 of them promised: 4 of room
  RouteRequest request;
  request.kv_tokens = 100;  // 7 pages
  auto route = PdPairRouter(kPairs).Pick(ws, request);
  ASSERT_TRUE(route);
  EXPECT_EQ(route->decode_worker, 1u) << "worker 2's room is 4 pages, not 12";
  request.kv_tokens = 161;  // 11 pages: neither has room; the prefill worker's pool never counts
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request));
  // A reservation never exceeds the worker's context.
  ws[0].max_context = 128;  // 8 pages at most
  ws[0].free_pages = 7;
  request.kv_tokens = 100000;
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request));
  ws[0].free_pages = 8;
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->decode_worker, 1u);
  EXPECT_EQ(PagesFor(0, 16), 1);
  EXPECT_EQ(PagesFor(16, 16), 1);
  EXPECT_EQ(PagesFor(17, 16), 2);
}

// A worker that grows KV on demand reserves the prompt plus its lookahead at the start: it
// takes a request whose whole KV would not fit now, and one without a lookahead does not.
TEST(PdPairRouterTest, AWorkerWithALookaheadNeedsRoomForThePromptAndLookaheadOnly) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode", 3), Worker(2, "prefill", 0)};
  ws[0].page_size = 16;
  RouteRequest request;
  request.prompt_tokens = 20;
  request.kv_tokens = 20 + 500;  // 33 pages up front
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request));
  ws[0].kv_lookahead_tokens = 16;  // 36 tokens: 3 pages
  EXPECT_EQ(InitialKvPages(ws[0], request), 3);
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->decode_worker, 1u);
  ws[0].pending_pages = 1;
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request));
  // Never more than the request may use.
  request.kv_tokens = 21;
  EXPECT_EQ(InitialKvPages(ws[0], request), 2);
}

TEST(PdPairRouterTest, APrefillWorkerTakesPromptsUpToOneStepQueued) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode"), Worker(2, "prefill")};
  ws[1].max_batch_tokens = 512;
  RouteRequest request;
  request.prompt_tokens = 300;
  ws[1].sent_prompt_tokens = 212;
  EXPECT_TRUE(PdPairRouter(kPairs).Pick(ws, request)) << "212 + 300 <= 512";
  ws[1].sent_prompt_tokens = 213;
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request))
      << "the request waits at the gateway instead";
  // An idle worker takes a prompt of any length (its engine chunks it).
  ws[1].sent_prompt_tokens = 0;
  request.prompt_tokens = 5000;
  EXPECT_TRUE(PdPairRouter(kPairs).Pick(ws, request));
  // One that did not say its step budget takes any.
  ws[1].max_batch_tokens = 0;
  ws[1].sent_prompt_tokens = 1 << 20;
  EXPECT_TRUE(PdPairRouter(kPairs).Pick(ws, request));
}

TEST(PdPairRouterTest, ACachedPrefixDrawsThePromptWhileItSavesMoreThanTheQueueCosts) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode"), Worker(2, "prefill"), Worker(3, "prefill")};
  ws[1].prefill_tokens_per_second = ws[2].prefill_tokens_per_second = 1000;
  RouteRequest request;
  request.prompt_tokens = 64 * 16;  // 64 blocks
  // Worker 3 holds 60 of them: 960 tokens saved, which weigh twice (cache_aware_scoring.h).
  request.matched_blocks = {{3, 60}};
  ws[2].sent_prompt_tokens = 1900;  // its queue costs less than that
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->prefill_worker, 3u);
  ws[2].sent_prompt_tokens = 2000;  // now more
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->prefill_worker, 2u);
  // On the decode side a held block counts as a free page.
  ws.push_back(Worker(4, "decode", 95));
  request.matched_blocks[4] = 10;
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->decode_worker, 4u);
  request.matched_blocks[4] = 4;
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->decode_worker, 1u);
}

// A decode worker (1) and two prefill workers (2, 3) of 1,000 prompt tokens a second with a step
// budget of `max_batch_tokens`.
std::vector<WorkerLoad> OneDecodeTwoPrefill(int max_batch_tokens) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode"), Worker(2, "prefill"), Worker(3, "prefill")};
  for (int i : {1, 2}) {
    ws[i].prefill_tokens_per_second = 1000;
    ws[i].max_batch_tokens = max_batch_tokens;
  }
  return ws;
}

// A prompt of 64 blocks of which prefill worker 3 holds 60: it computes 64 tokens, worker 2 all
// 1,024.
RouteRequest SixtyOfSixtyFourBlocksOnWorker3() {
  RouteRequest request;
  request.prompt_tokens = 64 * 16;
  request.matched_blocks = {{3, 60}};
  return request;
}

TEST(PdPairRouterTest, APrefillWorkerPastItsBudgetKeepsItsPrefixWithinTwoSteps) {
  std::vector<WorkerLoad> ws = OneDecodeTwoPrefill(512);
  const RouteRequest request = SixtyOfSixtyFourBlocksOnWorker3();
  ws[2].sent_prompt_tokens = 500;  // past its budget with this prompt, within two steps
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->prefill_worker, 3u);
  ws[2].sent_prompt_tokens = 961;  // 961 + 64 > 1,024: past two steps
  // Worker 2 (no queue) cannot take the 1,024-token prompt either past its 512-token budget:
  // only when idle.
  EXPECT_EQ(PdPairRouter(kPairs).Pick(ws, request)->prefill_worker, 2u);
  ws[1].sent_prompt_tokens = 1;
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request));
}

TEST(RoundRobinRouterTest, TakesUsableWorkersInTurnBlindToLoadAndCaches) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode", 10), Worker(2, "decode", 900),
                                Worker(3, "prefill"), Worker(4, "prefill"), Worker(5, "prefill")};
  ws[4].draining = true;
  RouteRequest request;
  request.matched_blocks = {{4, 50}};
  RoundRobinRouter router;
  std::vector<std::pair<uint64_t, uint64_t>> seen;
  for (int i = 0; i < 4; ++i) {
    auto route = router.Pick(ws, request);
    ASSERT_TRUE(route);
    seen.emplace_back(route->prefill_worker, route->decode_worker);
  }
  const std::vector<std::pair<uint64_t, uint64_t>> expected = {{3, 1}, {4, 2}, {3, 1}, {4, 2}};
  EXPECT_EQ(seen, expected);
  auto made = MakeRouter("round-robin");
  ASSERT_TRUE(made.ok());
  EXPECT_FALSE(MakeRouter("random").ok());
  EXPECT_NE(MakeRouter("random").status().message().find("cache-aware or round-robin"),
            std::string::npos);
  EXPECT_FALSE(MakeRouter("cache-aware", {.affinity = {.work_weight = -1}}).ok());
  EXPECT_FALSE(MakeRouter("cache-aware", {.affinity = {.queue_steps = -1}}).ok());
  EXPECT_TRUE(MakeRouter("cache-aware", {.affinity = {.work_weight = 0, .queue_steps = 0}}).ok());
}

TEST(PdPairRouterTest, CacheAffinityWeighsTheWorkSavedAndBoundsTheQueuePastTheBudget) {
  std::vector<WorkerLoad> ws = OneDecodeTwoPrefill(4096);
  const RouteRequest request = SixtyOfSixtyFourBlocksOnWorker3();  // 960 tokens saved
  ws[2].sent_prompt_tokens = 1500;  // more than it saves, less than twice that
  EXPECT_EQ(PdPairRouter({.affinity = {.work_weight = 0}}).Pick(ws, request)->prefill_worker, 2u);
  EXPECT_EQ(PdPairRouter({.affinity = {.work_weight = 1}}).Pick(ws, request)->prefill_worker, 3u);
  ws[2].max_batch_tokens = 1024;  // past its budget: within one step, not within none
  EXPECT_EQ(PdPairRouter({.affinity = {.work_weight = 1, .queue_steps = 2}})
                .Pick(ws, request)
                ->prefill_worker,
            3u);
  EXPECT_EQ(PdPairRouter({.affinity = {.work_weight = 1, .queue_steps = 0}})
                .Pick(ws, request)
                ->prefill_worker,
            2u);
}

// Conditional disaggregation: the decode worker prefills a prompt whose part it lacks is short,
// or when the prefill workers' queue predicts a later first token than its own prefill; each
// route says so. 1,000 prompt tokens a second everywhere.
TEST(PdPairRouterTest, ConditionalDisaggregationPrefillsLocallyWhenThatIsSooner) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode"), Worker(2, "prefill")};
  ws[1].prefill_tokens_per_second = 1000;  // the decode worker's counts at it, unmeasured
  RouteRequest request;
  request.prompt_tokens = 2048;
  request.matched_blocks = {{1, 100}};  // the decode worker lacks 448 tokens, P all 2,048
  auto route = PdPairRouter(kConditional).Pick(ws, request);
  ASSERT_TRUE(route);
  EXPECT_FALSE(route->disaggregated);
  EXPECT_EQ(route->prefill_worker, 1u);
  EXPECT_EQ(route->decode_worker, 1u);
  EXPECT_EQ(route->placement, "local");
  EXPECT_EQ(route->placement_reason, "local_faster");  // 1.5 x 0.448 s against 2.048 s
  // All 2,048 lacking: the idle prefill worker's 2.05 s against 1.5 x 2.05 s locally.
  request.matched_blocks.clear();
  route = PdPairRouter(kConditional).Pick(ws, request);
  ASSERT_TRUE(route);
  EXPECT_TRUE(route->disaggregated);
  EXPECT_EQ(route->prefill_worker, 2u);
  EXPECT_EQ(route->placement, "pair");
  EXPECT_EQ(route->placement_reason, "pair_faster");
  // A queue of 2,000 tokens ahead on the prefill worker: 4.05 s against 3.07 s locally.
  ws[1].sent_prompt_tokens = 2000;
  route = PdPairRouter(kConditional).Pick(ws, request);
  ASSERT_TRUE(route);
  EXPECT_EQ(route->placement, "local");
  EXPECT_EQ(route->placement_reason, "local_faster");
  // Its own prompt work counts against local prefill: 1,000 tokens queued there make it 4.57 s.
  ws[0].sent_prompt_tokens = 1000;
  EXPECT_EQ(PdPairRouter(kConditional).Pick(ws, request)->placement_reason, "pair_faster");
  // Its own measured rate goes before the prefill workers': at 4,000 tokens a second, 1.14 s.
  ws[0].prefill_tokens_per_second = 4000;
  EXPECT_EQ(PdPairRouter(kConditional).Pick(ws, request)->placement_reason, "local_faster");
}

// With no prompt rate measured anywhere, only a short uncached part goes local, up to the
// option's tokens.
TEST(PdPairRouterTest, ConditionalDisaggregationBeforeAnyRateIsMeasured) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode"), Worker(2, "prefill")};
  RouteRequest request;
  request.prompt_tokens = 2048;
  request.matched_blocks = {{1, 100}};  // 448 tokens lacking
  EXPECT_EQ(PdPairRouter(kConditional).Pick(ws, request)->placement_reason, "short_uncached");
  const PdPairRouter strict({.disaggregation = Disaggregation::kConditional,
                             .placement = {.short_uncached_tokens = 400}});
  EXPECT_EQ(strict.Pick(ws, request)->placement_reason, "pair_faster");
  request.matched_blocks.clear();
  EXPECT_EQ(PdPairRouter(kConditional).Pick(ws, request)->placement_reason, "pair_faster");
}

TEST(PdPairRouterTest, ConditionalDisaggregationWithoutPrefillRoomOrPrefillWorkers) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode"), Worker(2, "prefill")};
  ws[1].max_batch_tokens = 1024;
  ws[1].sent_prompt_tokens = 800;  // no room for 2,048 more; rates not measured yet
  RouteRequest request;
  request.prompt_tokens = 2048;
  EXPECT_FALSE(PdPairRouter(kConditional).Pick(ws, request))
      << "waits for the prefill worker's room";
  ws[1].prefill_tokens_per_second = 1000;  // measured: 2.85 s waiting at least, 3.07 s local
  EXPECT_FALSE(PdPairRouter(kConditional).Pick(ws, request));
  ws[1].sent_prompt_tokens = 1100;  // 3.15 s waiting at least: local is sooner
  auto route = PdPairRouter(kConditional).Pick(ws, request);
  ASSERT_TRUE(route);
  EXPECT_EQ(route->placement_reason, "local_faster");
  // No prefill worker of its layout at all: local, whatever the prompt.
  ws[1].layout_hash = 99;
  route = PdPairRouter(kConditional).Pick(ws, request);
  ASSERT_TRUE(route);
  EXPECT_EQ(route->placement, "local");
  EXPECT_EQ(route->placement_reason, "no_prefill_worker");
  EXPECT_FALSE(PdPairRouter(kPairs).Pick(ws, request)) << "always: a pair or nothing";
}

TEST(PdPairRouterTest, DisaggregationAlwaysOrNeverIgnoresThePrediction) {
  std::vector<WorkerLoad> ws = {Worker(1, "decode"), Worker(2, "prefill")};
  RouteRequest request;
  request.prompt_tokens = 16;
  auto pair = PdPairRouter().Pick(ws, request);  // the default
  ASSERT_TRUE(pair);
  EXPECT_EQ(pair->placement, "pair");
  EXPECT_EQ(pair->placement_reason, "always");
  request.prompt_tokens = 100000;
  auto local = PdPairRouter({.disaggregation = Disaggregation::kNever}).Pick(ws, request);
  ASSERT_TRUE(local);
  EXPECT_EQ(local->placement, "local");
  EXPECT_EQ(local->placement_reason, "never");
  EXPECT_STREQ(ToString(Disaggregation::kNever), "never");
  EXPECT_EQ(ParseDisaggregation("always").value(), Disaggregation::kAlways);
  EXPECT_FALSE(ParseDisaggregation("sometimes").ok());
}

TEST(ColocatedRouterTest, PicksTheWorkerOfRoleBothWithTheMostRoom) {
  std::vector<WorkerLoad> ws = {Worker(1, "both", 10), Worker(2, "decode", 500),
                                Worker(3, "both", 40), Worker(4, "both", 90)};
  ws[3].draining = true;
  auto route = ColocatedRouter().Pick(ws, {});
  ASSERT_TRUE(route);
  EXPECT_EQ(route->decode_worker, 3u);
  EXPECT_EQ(route->prefill_worker, 3u);
  EXPECT_FALSE(route->disaggregated);
  RouteRequest request;
  request.exclude = {1, 3};
  EXPECT_FALSE(ColocatedRouter().Pick(ws, request));
}

TEST(DefaultRouterTest, PrefersAPairAndFallsBackToColocated) {
  auto router = MakeDefaultRouter(kPairs);
  std::vector<WorkerLoad> ws = {Worker(1, "both", 900), Worker(2, "decode"), Worker(3, "prefill")};
  auto pair = router->Pick(ws, {});
  ASSERT_TRUE(pair);
  EXPECT_TRUE(pair->disaggregated);
  EXPECT_EQ(pair->decode_worker, 2u);
  RouteRequest request;
  request.exclude = {3};  // the pair's prefill side failed this request before
  auto colocated = router->Pick(ws, request);
  ASSERT_TRUE(colocated);
  EXPECT_FALSE(colocated->disaggregated);
  EXPECT_EQ(colocated->decode_worker, 1u);
  EXPECT_FALSE(router->Pick(std::vector<WorkerLoad>{}, {}));
}

}  // namespace
}  // namespace pdserve::router
