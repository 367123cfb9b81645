// The workers' load without sockets: Loads capped by what was registered; routed pages counted
// as taken until a Load sent after the answer shows them; prompts counted in a prefill worker's
// queue from routing to its answer; idle time; prefill rate and backlog at a given time; the
// largest KV; readiness; the summaries; a worker leaving.
#include "router/load_view.h"

#include <gtest/gtest.h>

#include <limits>

#include "router/routers.h"

namespace pdserve::router {
namespace {

using namespace std::chrono_literals;
using Clock = LoadView::Clock;

const Clock::time_point kT0 = Clock::time_point(100s);

proto::Register Worker(const std::string& role, int kv_pages = 512) {
  proto::Register r;
  r.set_name(role);
  r.set_role(role);
  r.set_capacity_class("reserved");
  r.set_kv_pages(kv_pages);
  r.set_page_size(16);
  r.set_max_context(4096);
  if (role != "both") r.set_layout_hash(42);
  return r;
}

proto::Load Load(int free_pages, int running = 0, int waiting = 0, bool draining = false) {
  proto::Load l;
  l.set_free_pages(free_pages);
  l.set_running(running);
  l.set_waiting(waiting);
  l.set_draining(draining);
  return l;
}

proto::StepReport PromptStep(double seconds, int32_t tokens) {
  proto::StepReport s;
  s.set_seconds(seconds);
  s.add_request_ids(99);
  s.add_tokens(tokens);
  s.add_prompt(true);
  return s;
}

// The snapshot's entry for worker `id` (fails the test when there is none).
router::WorkerLoad Of(const LoadView& view, uint64_t id) {
  for (const auto& l : view.Snapshot()) {
    if (l.id == id) return l;
  }
  ADD_FAILURE() << "worker " << id << " is not in the snapshot";
  return {};
}

TEST(LoadViewTest, AJoinedWorkerHasItsPoolFreeAndLoadsAreCappedByIt) {
  LoadView view;
  view.Join(1, Worker("decode"), kT0);
  EXPECT_EQ(Of(view, 1).free_pages, 512);
  EXPECT_EQ(Of(view, 1).kv_pages, 512);
  view.OnLoad(1, Load(std::numeric_limits<int32_t>::max(), 3, 2));
  EXPECT_EQ(Of(view, 1).free_pages, 512);
  EXPECT_EQ(Of(view, 1).running, 3);
  EXPECT_EQ(Of(view, 1).waiting, 2);
  view.OnLoad(1, Load(-40, -1, -7));
  EXPECT_EQ(Of(view, 1).free_pages, 0);
  EXPECT_EQ(Of(view, 1).running, 0);
  EXPECT_EQ(Of(view, 1).waiting, 0);
  view.OnLoad(7, Load(10));  // not registered: nothing to show
  EXPECT_EQ(view.Snapshot().size(), 1u);
}

// Pages routed to a decode worker stay pending through a Load sent before its answer, and leave
// the count with the first Load after it (or when the worker lets the attempt go).
TEST(LoadViewTest, RoutedPagesArePendingUntilALoadAfterTheAnswerShowsThem) {
  LoadView view;
  view.Join(1, Worker("prefill"), kT0);
  view.Join(2, Worker("decode"), kT0);
  view.OnLoad(2, Load(10));
  for (uint64_t a : {11, 12, 13}) view.Routed(a, {1, 2, true}, 3, 16, kT0);
  EXPECT_EQ(Of(view, 2).pending_pages, 9);
  EXPECT_EQ(Of(view, 2).attempts, 3);
  view.OnLoad(2, Load(10));  // sent before it read the Reserves
  EXPECT_EQ(Of(view, 2).pending_pages, 9);
  view.KvAnswered(11);
  EXPECT_EQ(Of(view, 2).pending_pages, 9) << "answered, but no Load shows it yet";
  view.OnLoad(2, Load(7));
  EXPECT_EQ(Of(view, 2).pending_pages, 6);
  EXPECT_EQ(Of(view, 2).free_pages, 7);
  view.KvAnswered(11);  // a second answer does not bring its pages back
  EXPECT_EQ(Of(view, 2).pending_pages, 6);
  view.Released(12, 2, kT0);  // refused for want of room
  view.Closed(12);
  EXPECT_EQ(Of(view, 2).pending_pages, 3);
  EXPECT_EQ(Of(view, 2).attempts, 2);
}

// A colocated worker's pages are answered by its first tokens, and its prompt counts in its
// own queue until then; one closed unanswered leaves the queue too.
TEST(LoadViewTest, AColocatedAttemptsPagesArePendingOnItsOneWorker) {
  LoadView view;
  view.Join(3, Worker("both"), kT0);
  view.Routed(30, {3, 3, false}, 4, 50, kT0);
  view.Routed(31, {3, 3, false}, 4, 20, kT0);
  EXPECT_EQ(Of(view, 3).pending_pages, 8);
  EXPECT_EQ(Of(view, 3).sent_prompt_tokens, 70);
  view.KvAnswered(30);
  view.PrefillAnswered(30, kT0 + 1s);
  view.OnLoad(3, Load(100));
  EXPECT_EQ(Of(view, 3).pending_pages, 4);
  EXPECT_EQ(Of(view, 3).sent_prompt_tokens, 20);
  view.Closed(31);  // cancelled before its first token
  EXPECT_EQ(Of(view, 3).sent_prompt_tokens, 0);
}

// A disaggregated prompt counts in its prefill worker's queue from routing (before the decode
// worker reserved), is sent on PrefillSent, and leaves the queue once on the answer; one
// withdrawn before it was sent leaves the queue at once.
TEST(LoadViewTest, APromptCountsInItsPrefillWorkersQueueFromRoutingToItsAnswer) {
  LoadView view;
  view.Join(1, Worker("prefill"), kT0);
  view.Join(2, Worker("decode"), kT0);
  view.Routed(40, {1, 2, true}, 2, 100, kT0);
  view.Routed(41, {1, 2, true}, 2, 30, kT0);
  EXPECT_EQ(Of(view, 1).sent_prompt_tokens, 130);
  EXPECT_EQ(Of(view, 1).attempts, 0) << "not sent to it yet";
  view.Withdrawn(41);
  EXPECT_EQ(Of(view, 1).sent_prompt_tokens, 100);
  view.PrefillSent(40, kT0);
  EXPECT_EQ(Of(view, 1).sent_prompt_tokens, 100);
  EXPECT_EQ(Of(view, 1).attempts, 1);
  view.PrefillAnswered(40, kT0 + 1s);
  EXPECT_EQ(Of(view, 1).sent_prompt_tokens, 0);
  view.PrefillAnswered(40, kT0 + 2s);  // its error after its token: counted once
  EXPECT_EQ(Of(view, 1).sent_prompt_tokens, 0);
  view.Closed(40);
  EXPECT_EQ(Of(view, 1).sent_prompt_tokens, 0) << "answered: not taken off again";
}

TEST(LoadViewTest, AWorkersIdleTimeCountsFromItsLastAttempt) {
  LoadView view;
  view.Join(1, Worker("prefill"), kT0);
  view.Join(2, Worker("decode"), kT0);
  auto idle = [&](uint64_t id, Clock::time_point now) {
    for (const auto& l : view.SnapshotWithIdleTimes(now)) {
      if (l.id == id) return l.idle_seconds;
    }
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(idle(2, kT0 + 5s), 5);
  EXPECT_EQ(view.Snapshot()[1].idle_seconds, 0) << "not computed for the router's snapshot";
  view.Routed(1, {1, 2, true}, 1, 16, kT0 + 6s);
  EXPECT_EQ(idle(2, kT0 + 7s), 0) << "it holds the reservation";
  EXPECT_DOUBLE_EQ(idle(1, kT0 + 7s), 7) << "nothing was sent to the prefill worker yet";
  view.Released(1, 2, kT0 + 8s);
  view.Closed(1);
  EXPECT_DOUBLE_EQ(idle(2, kT0 + 10s), 2) << "idle since the attempt, not since it joined";
}

// A prefill worker's rate is the cost of a prompt token past a step's fixed cost, fitted to its
// steps: the short steps of mostly cached prompts (a few tokens over the fixed cost) do not drag
// it down to their own rates.
TEST(LoadViewTest, ShortStepsOfCachedPromptsDoNotDragThePromptRateDown) {
  LoadView view;
  view.Join(1, Worker("prefill"), kT0);
  view.OnStep(1, PromptStep(0.25, 200));                             // a whole prompt
  for (int i = 0; i < 9; ++i) view.OnStep(1, PromptStep(0.015, 1));  // 9 cached ones
  // The line through both: 0.235 s for 199 tokens more, and a fixed cost of 0.015 s less one
  // token's. Averaging the steps' rates (66 tokens a second for most) would give about 290.
  const router::PrefillCapacity c = view.Prefill(kT0);
  EXPECT_NEAR(c.tokens_per_second, 199 / 0.235, 1e-6);
  EXPECT_NEAR(c.step_seconds, 0.015 - 0.235 / 199, 1e-9);
}

// A Load is news for the admission queue only when the worker may have room it did not have: a
// heartbeat repeating the last Load, or a worker that got busier, is not.
TEST(LoadViewTest, ALoadSaysWhetherTheWorkerMayHaveMoreRoom) {
  LoadView view;
  view.Join(1, Worker("decode"), kT0);  // 512 pages, all free
  EXPECT_FALSE(view.OnLoad(1, Load(512))) << "the same as it registered";
  EXPECT_FALSE(view.OnLoad(1, Load(400, 3, 1))) << "busier";
  EXPECT_FALSE(view.OnLoad(1, Load(400, 3, 1))) << "a heartbeat repeating it";
  EXPECT_TRUE(view.OnLoad(1, Load(450, 3, 1))) << "pages freed";
  EXPECT_TRUE(view.OnLoad(1, Load(450, 2, 1))) << "a sequence ended";
  EXPECT_TRUE(view.OnLoad(1, Load(450, 2, 0))) << "one waiting started";
  EXPECT_FALSE(view.OnLoad(1, Load(450, 2, 0, /*draining=*/true)));
  EXPECT_TRUE(view.OnLoad(1, Load(450, 2, 0))) << "no longer draining";
  EXPECT_TRUE(view.OnLoad(1, Load(9999, 2, 0))) << "free up to its pool";
  EXPECT_FALSE(view.OnLoad(1, Load(9999, 2, 0))) << "capped at its pool, as before";
  EXPECT_FALSE(view.OnLoad(2, Load(512))) << "not registered";
}

// A decode worker's unloaded step is its decode steps with one sequence alone, averaged (0.9 of
// the old): steps of a batch, or with prompt work in them, are not unloaded ones.
TEST(LoadViewTest, TheUnloadedDecodeStepIsTheOneSequenceSteps) {
  LoadView view;
  view.Join(1, Worker("decode"), kT0);
  EXPECT_EQ(Of(view, 1).unloaded_decode_step_seconds, 0) << "not measured yet";
  proto::StepReport alone;
  alone.set_seconds(0.02);
  alone.add_request_ids(7);
  alone.add_tokens(1);
  alone.add_prompt(false);
  view.OnStep(1, alone);
  EXPECT_DOUBLE_EQ(Of(view, 1).unloaded_decode_step_seconds, 0.02);
  proto::StepReport batch = alone;
  batch.set_seconds(0.5);
  batch.add_request_ids(8);
  batch.add_tokens(1);
  batch.add_prompt(false);
  view.OnStep(1, batch);
  view.OnStep(1, PromptStep(0.5, 1));
  EXPECT_DOUBLE_EQ(Of(view, 1).unloaded_decode_step_seconds, 0.02);
  alone.set_seconds(0.03);
  view.OnStep(1, alone);
  EXPECT_DOUBLE_EQ(Of(view, 1).unloaded_decode_step_seconds, 0.9 * 0.02 + 0.1 * 0.03);
}

// A prefill (or colocated) worker that has run no prompt yet counts at the measured workers'
// mean rate; decode and draining workers count not at all.
TEST(LoadViewTest, PrefillRateCountsAnUnmeasuredWorkerAtTheMeasuredMean) {
  LoadView view;
  view.Join(1, Worker("prefill"), kT0);
  EXPECT_EQ(view.Prefill(kT0).tokens_per_second, 0) << "nothing measured anywhere yet";
  EXPECT_EQ(view.Prefill(kT0).workers, 0);
  view.OnStep(1, PromptStep(0.5, 1000));
  EXPECT_DOUBLE_EQ(view.Prefill(kT0).tokens_per_second, 2000);
  // Tokens and seconds averaged apart (0.9 of the old, all of the new): 1900 / 1.45 s.
  view.OnStep(1, PromptStep(1.0, 1000));
  EXPECT_DOUBLE_EQ(view.Prefill(kT0).tokens_per_second, 1900 / 1.45);
  view.Join(2, Worker("both"), kT0);
  view.Join(3, Worker("decode"), kT0);
  view.OnStep(3, PromptStep(0.1, 1000));
  view.Join(4, Worker("prefill"), kT0);
  view.OnLoad(4, Load(512, 0, 0, /*draining=*/true));
  const router::PrefillCapacity c = view.Prefill(kT0);
  EXPECT_DOUBLE_EQ(c.tokens_per_second, 2 * 1900 / 1.45);
  EXPECT_EQ(c.workers, 2);
  EXPECT_EQ(c.idle_workers, 2);
}

// The backlog is what was sent, less what the worker did of it at its rate since it was sent
// the first prompt (or answered its last): a request behind half a step waits half a step.
TEST(LoadViewTest, APrefillWorkersBacklogShrinksAsItsStepRuns) {
  LoadView view;
  view.Join(1, Worker("prefill"), kT0);
  view.Join(2, Worker("decode"), kT0);
  view.OnStep(1, PromptStep(1, 1000));
  view.Routed(7, {1, 2, true}, 63, 1000, kT0);
  view.PrefillSent(7, kT0 + 1s);
  EXPECT_DOUBLE_EQ(view.Prefill(kT0 + 1s).queued_prompt_tokens, 1000);
  EXPECT_EQ(view.Prefill(kT0 + 1s).idle_workers, 0);
  EXPECT_NEAR(view.Prefill(kT0 + 1400ms).queued_prompt_tokens, 600, 1e-9);
  view.Routed(8, {1, 2, true}, 63, 500, kT0 + 1500ms);
  view.PrefillSent(8, kT0 + 1500ms);  // queued behind the running step: counts from its start
  EXPECT_NEAR(view.Prefill(kT0 + 1500ms).queued_prompt_tokens, 1000, 1e-9);
  EXPECT_EQ(view.Prefill(kT0 + 3s).queued_prompt_tokens, 0) << "overdue: none, not negative";
  view.PrefillAnswered(7, kT0 + 3s);
  EXPECT_DOUBLE_EQ(view.Prefill(kT0 + 3s).queued_prompt_tokens, 500);
  EXPECT_NEAR(view.Prefill(kT0 + 3200ms).queued_prompt_tokens, 300, 1e-9);
  // The same in seconds, at its measured 1000 tokens a second (no fixed cost measured yet).
  EXPECT_NEAR(view.Prefill(kT0 + 3200ms).queued_prompt_seconds, 0.3, 1e-9);
}

TEST(LoadViewTest, TheLargestKvIsADecodeOrColocatedPoolCappedByItsContext) {
  LoadView view;
  EXPECT_EQ(view.LargestKvTokens(), 0);
  view.Join(1, Worker("prefill", 100000), kT0);
  EXPECT_EQ(view.LargestKvTokens(), 0) << "a prefill worker holds no request's KV";
  view.Join(2, Worker("decode", 100), kT0);
  EXPECT_EQ(view.LargestKvTokens(), 1600);
  view.Join(3, Worker("decode", 512), kT0);
  EXPECT_EQ(view.LargestKvTokens(), 4096) << "8192 tokens of pages, a context of 4096";
  proto::Register unbounded = Worker("both", 1000);
  unbounded.set_max_context(0);
  view.Join(4, unbounded, kT0);
  EXPECT_EQ(view.LargestKvTokens(), 16000);
}

TEST(LoadViewTest, ThereIsARouteOnceAPairOrAColocatedWorkerJoined) {
  LoadView view;
  const auto router = router::MakeDefaultRouter();
  EXPECT_FALSE(view.HasRoute(*router));
  view.Join(1, Worker("prefill"), kT0);
  EXPECT_FALSE(view.HasRoute(*router));
  view.Join(2, Worker("decode"), kT0);
  EXPECT_TRUE(view.HasRoute(*router));
  view.Leave(2);
  EXPECT_FALSE(view.HasRoute(*router));
  view.Join(3, Worker("both"), kT0);
  EXPECT_TRUE(view.HasRoute(*router));
}

TEST(LoadViewTest, SummariesAndAttemptsHeldFollowRoutingAndLeaving) {
  LoadView view;
  view.Join(1, Worker("prefill"), kT0);
  view.Join(2, Worker("decode"), kT0);
  view.OnLoad(2, Load(300, 4, 1, /*draining=*/true));
  view.Routed(5, {1, 2, true}, 2, 16, kT0);
  view.Routed(6, {1, 2, true}, 2, 16, kT0);
  view.PrefillSent(5, kT0);
  EXPECT_EQ(view.HeldBy(2), (std::set<uint64_t>{5, 6}));
  EXPECT_EQ(view.HeldBy(1), (std::set<uint64_t>{5}));
  const auto summaries = view.Summaries();
  ASSERT_EQ(summaries.size(), 2u);
  EXPECT_EQ(summaries[1].id, 2u);
  EXPECT_EQ(summaries[1].role, "decode");
  EXPECT_EQ(summaries[1].free_pages, 300);
  EXPECT_EQ(summaries[1].kv_pages, 512) << "as registered";
  EXPECT_EQ(summaries[1].running, 4);
  EXPECT_EQ(summaries[1].inflight, 2);
  EXPECT_TRUE(summaries[1].draining);
  EXPECT_EQ(summaries[0].inflight, 1);
  view.Released(5, 2, kT0);
  view.Released(6, 2, kT0);
  view.Leave(2);
  EXPECT_TRUE(view.HeldBy(2).empty());
  ASSERT_EQ(view.Snapshot().size(), 1u);
  EXPECT_EQ(view.Snapshot()[0].id, 1u);
}

}  // namespace
}  // namespace pdserve::router
