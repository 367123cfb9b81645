// Cache-aware scoring's numbers: the cached worker wins at equal load, loses to an idle uncached
// one once its queue costs more than its cache saves (the crossover at the tokens the cache
// saves, weighted), takes a request past its step budget only for a longer prefix, the same for
// decode workers against their batch, and conditional disaggregation's three reasons with their
// boundaries.
#include "router/cache_aware_scoring.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace pdserve::router {
namespace {

// 128 blocks of 16 tokens; the cached worker holds the first 100 (1,600 tokens), so it computes
// 448 tokens where an uncached one computes 2,048.
const PrefillJob kJob{.prompt_tokens = 2048, .page_size = 16};

PrefillCandidate Prefill(uint64_t worker, int matched, int64_t queued, double rate = 10000) {
  return {.worker = worker,
          .matched_blocks = matched,
          .tokens_per_second = rate,
          .queued_prompt_tokens = queued};
}

TEST(CacheAwareScoringTest, UncachedTokensLeaveAtLeastTheLastToken) {
  EXPECT_EQ(UncachedTokens(2048, 100, 16), 448);
  EXPECT_EQ(UncachedTokens(2048, 0, 16), 2048);
  EXPECT_EQ(UncachedTokens(2048, 128, 16), 1);
  EXPECT_EQ(UncachedTokens(40, 2, 16), 8);
}

TEST(CacheAwareScoringTest, PrefillPrefersTheCachedWorkerAtEqualLoad) {
  const std::vector<PrefillCandidate> c = {Prefill(1, 0, 500), Prefill(2, 100, 500)};
  EXPECT_EQ(PickPrefill(c, kJob), 1u);
  EXPECT_DOUBLE_EQ(PredictPrefill(c[1], kJob, 10000).ttft_seconds(), (500 + 448) / 10000.0);
}

TEST(CacheAwareScoringTest, PrefillPrefersTheIdleUncachedWorkerOnceTheCachedOneIsLoaded) {
  // The cache saves 1,600 tokens, which weigh twice (work_weight 1): the cached worker wins while
  // its queue is shorter than 3,200 tokens.
  const std::vector<PrefillCandidate> below = {Prefill(1, 0, 0), Prefill(2, 100, 3100)};
  EXPECT_EQ(PickPrefill(below, kJob), 1u);
  const std::vector<PrefillCandidate> above = {Prefill(1, 0, 0), Prefill(2, 100, 3300)};
  EXPECT_EQ(PickPrefill(above, kJob), 0u);
  // At the crossover both score 0.4096 s; the cached one takes the tie.
  const std::vector<PrefillCandidate> at = {Prefill(1, 0, 0), Prefill(2, 100, 3200)};
  EXPECT_EQ(PickPrefill(at, kJob), 1u);
  // A slower cached worker: at half the rate its 448 tokens score 0.1792 s against 0.4096 s,
  // and it wins; at a tenth, 0.896 s, it loses.
  EXPECT_EQ(PickPrefill(std::vector{Prefill(1, 0, 0), Prefill(2, 100, 0, 5000)}, kJob), 1u);
  EXPECT_EQ(PickPrefill(std::vector{Prefill(1, 0, 0), Prefill(2, 100, 0, 1000)}, kJob), 0u);
}

TEST(CacheAwareScoringTest, WithoutTheWorkWeightThePickIsTheSoonestFirstToken) {
  PrefillJob ttft_only = kJob;
  ttft_only.work_weight = 0;
  // The crossover falls to the 1,600 tokens saved.
  EXPECT_EQ(PickPrefill(std::vector{Prefill(1, 0, 0), Prefill(2, 100, 1500)}, ttft_only), 1u);
  EXPECT_EQ(PickPrefill(std::vector{Prefill(1, 0, 0), Prefill(2, 100, 1700)}, ttft_only), 0u);
}

TEST(CacheAwareScoringTest, AWorkerPastItsStepBudgetTakesOnlyALongerCachedPrefixWithinItsLimit) {
  PrefillCandidate full = Prefill(2, 100, 1000);
  full.has_room = false;
  full.queue_limit_tokens = 1448;  // its 1,000 queued and this prompt's 448 fit
  EXPECT_EQ(PickPrefill(std::vector{Prefill(1, 0, 0), full}, kJob), 1u);
  full.queue_limit_tokens = 1447;  // one token less: the worker with room
  EXPECT_EQ(PickPrefill(std::vector{Prefill(1, 0, 0), full}, kJob), 0u);
  // No longer a prefix than the others hold: it takes nothing past its budget, even scoring best.
  PrefillCandidate same = Prefill(2, 0, 0);
  same.has_room = false;
  same.queue_limit_tokens = 100000;
  PrefillCandidate busy = Prefill(1, 0, 5000);
  EXPECT_EQ(PickPrefill(std::vector{busy, same}, kJob), 0u);
  // None with room and none that may go past its budget: the request waits.
  busy.has_room = false;
  EXPECT_EQ(PickPrefill(std::vector{busy, same}, kJob), std::nullopt);
}

TEST(CacheAwareScoringTest, AnUnmeasuredWorkerCountsAtTheDefaultOrTheMeanRate) {
  const std::vector<PrefillCandidate> c = {Prefill(1, 0, 0, 0), Prefill(2, 0, 0, 4000),
                                           Prefill(3, 0, 0, 2000)};
  EXPECT_DOUBLE_EQ(PrefillRate(c[0], c, kJob), 3000);
  PrefillJob with_default = kJob;
  with_default.default_tokens_per_second = 8000;
  EXPECT_DOUBLE_EQ(PrefillRate(c[0], c, with_default), 8000);
  EXPECT_DOUBLE_EQ(PrefillRate(c[1], c, with_default), 4000);
  const std::vector<PrefillCandidate> none = {Prefill(1, 0, 100, 0), Prefill(2, 50, 100, 0)};
  EXPECT_DOUBLE_EQ(PrefillRate(none[0], none, kJob), 1);
  EXPECT_EQ(PickPrefill(none, kJob), 1u);
  EXPECT_EQ(PickPrefill(std::vector<PrefillCandidate>{}, kJob), std::nullopt);
}

// 128 blocks; sending one takes 1 ms; each sequence in a decode batch costs this request 10 ms.
const DecodeJob kDecode{
    .prompt_blocks = 128, .seconds_per_block_sent = 0.001, .seconds_per_running_sequence = 0.01};

TEST(CacheAwareScoringTest, DecodePrefersTheCachedWorkerAtEqualLoad) {
  const std::vector<DecodeCandidate> c = {
      {.worker = 1, .matched_blocks = 0, .free_pages = 900, .running = 4},
      {.worker = 2, .matched_blocks = 100, .free_pages = 500, .running = 4}};
  EXPECT_EQ(PickDecode(c, kDecode), 1u);
  EXPECT_DOUBLE_EQ(DecodeCost(c[1], kDecode), 28 * 0.001 + 4 * 0.01);
}

TEST(CacheAwareScoringTest, DecodePrefersTheIdleUncachedWorkerOnceTheCachedOneRunsMore) {
  // Holding 100 blocks saves 0.1 s of sending: worth up to ten more running sequences.
  auto pick = [](int cached_running) {
    return PickDecode(
        std::vector<DecodeCandidate>{
            {.worker = 1, .matched_blocks = 0, .free_pages = 500, .running = 0},
            {.worker = 2, .matched_blocks = 100, .free_pages = 500, .running = cached_running}},
        kDecode);
  };
  EXPECT_EQ(pick(9), 1u);
  EXPECT_EQ(pick(11), 0u);
  // Equal cost: the one with more free pages.
  EXPECT_EQ(PickDecode(std::vector<DecodeCandidate>{{.worker = 1, .free_pages = 100},
                                                    {.worker = 2, .free_pages = 300}},
                       kDecode),
            1u);
}

TEST(CacheAwareScoringTest, CandidatesFromASnapshotsWorker) {
  WorkerLoad w;
  w.id = 4;
  w.free_pages = 100;
  w.pending_pages = 20;
  w.running = 3;
  w.attempts = 5;  // the three running and two reserved
  w.sent_prompt_tokens = 700;
  const DecodeCandidate d = DecodeCandidateOf(w, 9);
  EXPECT_EQ(d.worker, 4u);
  EXPECT_EQ(d.matched_blocks, 9);
  EXPECT_EQ(d.free_pages, 80);
  EXPECT_EQ(d.running, 5);
  w.attempts = 1;  // its last Load is from before two of them finished
  EXPECT_EQ(DecodeCandidateOf(w, 0).running, 3);
  const PrefillCandidate p = PrefillCandidateOf(w, 2, 3000);
  EXPECT_EQ(p.worker, 4u);
  EXPECT_EQ(p.matched_blocks, 2);
  EXPECT_EQ(p.queued_prompt_tokens, 700);
  EXPECT_DOUBLE_EQ(p.tokens_per_second, 3000);
}

// Local prefill at 5,000 tokens a second; the pair's prefill worker runs 10,000.
PlacementInputs Inputs(int64_t uncached, double pair_queue_seconds) {
  PlacementInputs in;
  in.uncached_tokens = uncached;
  in.local_tokens_per_second = 5000;
  in.pair = {.queue_seconds = pair_queue_seconds, .compute_seconds = uncached / 10000.0};
  in.transfer_seconds = 0.01;
  return in;
}

TEST(CacheAwareScoringTest, WithoutALocalRateOnlyShortPromptsArePrefilledLocally) {
  PlacementInputs unmeasured = Inputs(512, 0);
  unmeasured.local_tokens_per_second = 0;
  Placement p = ChoosePlacement(unmeasured);
  EXPECT_TRUE(p.local);
  EXPECT_EQ(p.reason, "short_uncached");
  unmeasured.uncached_tokens = 513;
  p = ChoosePlacement(unmeasured);
  EXPECT_FALSE(p.local);
  EXPECT_EQ(p.reason, "pair_faster");
  // Measured, a short prompt goes where it is sooner: 512 tokens take 0.154 s locally against
  // the idle pair's 0.061 s.
  p = ChoosePlacement(Inputs(512, 0));
  EXPECT_FALSE(p.local);
  EXPECT_EQ(p.reason, "pair_faster");
  EXPECT_EQ(ChoosePlacement(Inputs(512, 0.1)).reason, "local_faster");
}

TEST(CacheAwareScoringTest, ALongPrefillQueueSendsTheRequestLocal) {
  // 4,000 uncached tokens: local 0.8 s * 1.5 = 1.2 s; the pair 0.4 s + 0.01 s + its queue.
  Placement p = ChoosePlacement(Inputs(4000, 0.7));
  EXPECT_EQ(p.reason, "pair_faster");
  EXPECT_DOUBLE_EQ(p.local_seconds, 1.2);
  EXPECT_DOUBLE_EQ(p.pair_seconds, 1.11);
  p = ChoosePlacement(Inputs(4000, 0.8));
  EXPECT_TRUE(p.local);
  EXPECT_EQ(p.reason, "local_faster");
  // No prefill worker can take it at all.
  p = ChoosePlacement(Inputs(4000, std::numeric_limits<double>::infinity()));
  EXPECT_EQ(p.reason, "local_faster");
  // Without a measured local rate, a long prompt goes to the pair.
  PlacementInputs unmeasured = Inputs(4000, 5);
  unmeasured.local_tokens_per_second = 0;
  EXPECT_EQ(ChoosePlacement(unmeasured).reason, "pair_faster");
  // Work already waiting on the decode worker counts against local.
  PlacementInputs busy = Inputs(4000, 0.8);
  busy.local_queue_seconds = 0.1;
  EXPECT_EQ(ChoosePlacement(busy).reason, "pair_faster");
}

}  // namespace
}  // namespace pdserve::router
