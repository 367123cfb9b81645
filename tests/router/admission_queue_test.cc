#include "router/admission_queue.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace pdserve::router {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Verdict = Admission::Verdict;

// A stand-in for the registry: `free` routes left; started requests are recorded in order.
struct Cluster {
  int free = 0;
  std::vector<std::string> started;
  std::vector<std::string> timed_out;
  PrefillCapacity capacity;
};

struct AdmissionQueueTest : ::testing::Test {
  Cluster cluster;
  std::chrono::steady_clock::time_point now =
      std::chrono::steady_clock::time_point() + seconds(100);
  AdmissionQueue queue{[this] { return cluster.capacity; }, [this] { return now; }};

  AdmissionRequest Request(const std::string& name, const std::string& tenant,
                           int64_t prompt_tokens = 10, double weight = 1,
                           Priority priority = Priority::kInteractive) {
    AdmissionRequest r;
    r.tenant = tenant;
    r.weight = weight;
    r.priority = priority;
    r.prompt_tokens = prompt_tokens;
    r.cost = prompt_tokens;
    r.deadline = now + seconds(30);
    r.try_start = [this, name] {
      if (cluster.free <= 0) return false;
      --cluster.free;
      cluster.started.push_back(name);
      return true;
    };
    r.on_timeout = [this, name] { cluster.timed_out.push_back(name); };
    return r;
  }
};

TEST_F(AdmissionQueueTest, StartsAtOnceWhenARouteIsFreeAndNobodyWaits) {
  cluster.free = 1;
  const Admission a = queue.Submit(Request("a", "t"));
  EXPECT_EQ(a.verdict, Verdict::kStarted);
  EXPECT_EQ(cluster.started, std::vector<std::string>{"a"});
  EXPECT_EQ(queue.waiting(), 0u);
}

TEST_F(AdmissionQueueTest, WaitsWithoutARouteAndStartsInArrivalOrderWhenRoomComes) {
  EXPECT_EQ(queue.Submit(Request("a", "t")).verdict, Verdict::kQueued);
  EXPECT_EQ(queue.Submit(Request("b", "t")).verdict, Verdict::kQueued);
  EXPECT_EQ(queue.waiting(), 2u);
  EXPECT_EQ(queue.waiting_prompt_tokens(), 20);
  EXPECT_EQ(queue.Pump(), 0);
  cluster.free = 1;
  EXPECT_EQ(queue.Pump(), 1);
  cluster.free = 5;
  EXPECT_EQ(queue.Pump(), 1);
  EXPECT_EQ(cluster.started, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(queue.waiting(), 0u);
}

TEST_F(AdmissionQueueTest, ANewcomerDoesNotJumpTheQueueEvenWhenARouteIsFree) {
  queue.Submit(Request("first", "t"));
  cluster.free = 1;
  EXPECT_EQ(queue.Submit(Request("second", "t")).verdict, Verdict::kQueued);
  EXPECT_TRUE(cluster.started.empty());
  queue.Pump();
  EXPECT_EQ(cluster.started, std::vector<std::string>{"first"});
}

TEST_F(AdmissionQueueTest, TenantsShareByWeightWhileBothWait) {
  // A floods first; B (weight 1) and C (weight 2) arrive later. Every request costs the same.
  for (int i = 0; i < 30; ++i) queue.Submit(Request("a" + std::to_string(i), "A"));
  for (int i = 0; i < 30; ++i) queue.Submit(Request("b" + std::to_string(i), "B"));
  for (int i = 0; i < 30; ++i) queue.Submit(Request("c" + std::to_string(i), "C", 10, 2.0));
  cluster.free = 40;
  queue.Pump();
  int a = 0, b = 0, c = 0;
  for (const auto& s : cluster.started) (s[0] == 'a' ? a : s[0] == 'b' ? b : c)++;
  // Shares 1:1:2 of 40 starts: 10, 10, 20, each within a request of it; A's head start buys it
  // nothing.
  EXPECT_NEAR(a, 10, 1);
  EXPECT_NEAR(b, 10, 1);
  EXPECT_NEAR(c, 20, 1);
}

TEST_F(AdmissionQueueTest, ATenantThatWasIdleGetsNoCreditSavedUp) {
  for (int i = 0; i < 20; ++i) queue.Submit(Request("a" + std::to_string(i), "A"));
  cluster.free = 10;
  queue.Pump();  // A alone: ten of its requests start
  for (int i = 0; i < 10; ++i) queue.Submit(Request("b" + std::to_string(i), "B"));
  cluster.started.clear();
  cluster.free = 10;
  queue.Pump();
  int b = 0;
  for (const auto& s : cluster.started) b += s[0] == 'b';
  EXPECT_NEAR(b, 5, 1);  // half, not all ten: B did not save up while it sent nothing
}

TEST_F(AdmissionQueueTest, InteractiveGoesBeforeBatch) {
  queue.Submit(Request("batch1", "A", 10, 1, Priority::kBatch));
  queue.Submit(Request("batch2", "A", 10, 1, Priority::kBatch));
  queue.Submit(Request("chat", "B", 10, 1, Priority::kInteractive));
  cluster.free = 2;
  queue.Pump();
  EXPECT_EQ(cluster.started, (std::vector<std::string>{"chat", "batch1"}));
  // An interactive request with only batch waiting is tried at once.
  cluster.free = 1;
  EXPECT_EQ(queue.Submit(Request("chat2", "B")).verdict, Verdict::kStarted);
}

TEST_F(AdmissionQueueTest, WithdrawnRequestsNeverStart) {
  const Admission a = queue.Submit(Request("a", "t"));
  queue.Submit(Request("b", "t"));
  ASSERT_EQ(a.verdict, Verdict::kQueued);
  EXPECT_TRUE(queue.Withdraw(a.ticket));
  EXPECT_FALSE(queue.Withdraw(a.ticket));
  cluster.free = 5;
  queue.Pump();
  EXPECT_EQ(cluster.started, std::vector<std::string>{"b"});
  EXPECT_EQ(queue.waiting(), 0u);
}

TEST_F(AdmissionQueueTest, DeadlinesTimeRequestsOutOnceAndTheyNeverStart) {
  AdmissionRequest shortly = Request("short", "t");
  shortly.deadline = now + seconds(1);
  const Admission a = queue.Submit(std::move(shortly));
  queue.Submit(Request("long", "t"));
  now += milliseconds(999);
  EXPECT_EQ(queue.Expire(), 0);
  now += milliseconds(1);
  EXPECT_EQ(queue.Expire(), 1);
  EXPECT_EQ(queue.Expire(), 0);
  EXPECT_EQ(cluster.timed_out, std::vector<std::string>{"short"});
  EXPECT_FALSE(queue.Withdraw(a.ticket));
  // A request past its deadline is timed out by Pump too, never started.
  AdmissionRequest late = Request("late", "u");
  late.deadline = now + seconds(1);
  queue.Submit(std::move(late));
  now += seconds(2);
  cluster.free = 5;
  queue.Pump();
  EXPECT_EQ(cluster.started, std::vector<std::string>{"long"});
  EXPECT_EQ(cluster.timed_out, (std::vector<std::string>{"short", "late"}));
}

TEST_F(AdmissionQueueTest, PredictsNothingAndRefusesNothingBeforeAnyPromptRate) {
  AdmissionRequest r = Request("a", "t", 1000);
  r.ttft_slo = milliseconds(1);
  const Admission a = queue.Submit(std::move(r));
  EXPECT_EQ(a.verdict, Verdict::kQueued);
  EXPECT_EQ(a.predicted_wait_s, 0);
}

TEST_F(AdmissionQueueTest, RefusesEarlyWhenThePredictedWaitExceedsTheSlo) {
  cluster.capacity.tokens_per_second = 1000;  // two workers of 500 tokens/s
  cluster.capacity.workers = 2;
  cluster.capacity.queued_prompt_seconds = 1.0;  // 500 tokens on one of them
  for (int i = 0; i < 10; ++i) queue.Submit(Request("a" + std::to_string(i), "A", 100));
  // B's wait: A's 1000 queued tokens are shared with it, so of A only as much as B's own cost
  // (100) goes first; with the 500 in the workers that is 0.6 s at 1000 tokens/s, then its own
  // 100 tokens on one worker, 0.2 s.
  AdmissionRequest b = Request("b", "B", 100);
  EXPECT_NEAR(queue.PredictWait(b), 0.6 + 0.2, 1e-9);
  b.ttft_slo = milliseconds(1100);  // admitted up to 80% of it: 0.88 s
  EXPECT_EQ(queue.Submit(std::move(b)).verdict, Verdict::kQueued);
  // A's next request waits for all of A's queue and B's: (1000 + 100 + 500) / 1000 + 0.2 s.
  AdmissionRequest a = Request("a10", "A", 100);
  EXPECT_NEAR(queue.PredictWait(a), 1.6 + 0.2, 1e-9);
  a.ttft_slo = milliseconds(2000);  // 1.8 s is within it, but not within 80% of it
  const Admission refused = queue.Submit(std::move(a));
  EXPECT_EQ(refused.verdict, Verdict::kRejected);
  EXPECT_EQ(refused.retry_after_s, 1);  // ceil(1.8 - 1.6)
  EXPECT_NEAR(refused.predicted_wait_s, 1.8, 1e-9);
  EXPECT_NEAR(refused.predicted_queue_s, 1.6, 1e-9) << "the work ahead of it, not its own prompt";
  EXPECT_EQ(queue.waiting(), 11u);
  EXPECT_TRUE(cluster.started.empty());
}

// Once 20 requests' times after their prefill are known, the prediction adds their median;
// refusals judge the whole prediction.
TEST_F(AdmissionQueueTest, TheTimeAfterPrefillIsLearnedFromRecentRequests) {
  cluster.capacity.tokens_per_second = 1000;  // one worker; nothing ahead: 100 tokens take 0.1 s
  cluster.capacity.workers = 1;
  cluster.capacity.idle_workers = 1;
  AdmissionRequest r = Request("r", "A", 100);
  EXPECT_NEAR(queue.PredictWait(r), 0.1, 1e-9);
  for (int i = 0; i < 19; ++i) queue.RecordAfterPrefill(0.01 * (i % 10 + 1));
  EXPECT_NEAR(queue.PredictWait(r), 0.1, 1e-9) << "19 are not enough";
  queue.RecordAfterPrefill(0.1);
  // 0.01..0.1 twice: the median (the 11th of 20) 0.06.
  EXPECT_NEAR(queue.PredictWait(r), 0.1 + 0.06, 1e-9);
  r.ttft_slo = milliseconds(190);  // 0.16 > 0.8 x 0.19, though the prompt's 0.1 is within it
  const Admission refused = queue.Submit(r);
  EXPECT_EQ(refused.verdict, Verdict::kRejected);
  EXPECT_NEAR(refused.predicted_wait_s, 0.16, 1e-9);
  EXPECT_NEAR(refused.after_prefill_s, 0.06, 1e-9);
  r.ttft_slo = milliseconds(210);
  cluster.free = 1;
  EXPECT_EQ(queue.Submit(r).verdict, Verdict::kStarted);
  queue.RecordAfterPrefill(-1);  // not a time: ignored
  // Those older than a minute are forgotten.
  now += seconds(61);
  EXPECT_NEAR(queue.PredictWait(r), 0.1, 1e-9);
}

// A prefill worker that holds no prompt (one that just joined) takes a request with nothing
// ahead of it at once, however long the other workers' queues: only its own prompt counts.
TEST_F(AdmissionQueueTest, AnIdlePrefillWorkerTakesARequestWithNothingAheadAtOnce) {
  cluster.capacity.tokens_per_second = 1000;  // two workers of 500 tokens/s
  cluster.capacity.workers = 2;
  cluster.capacity.queued_prompt_seconds = 10;  // 5000 tokens, all on the busy one
  AdmissionRequest r = Request("r", "A", 100);
  EXPECT_NEAR(queue.PredictWait(r), 5.0 + 0.2, 1e-9) << "no worker idle: the queue is shared";
  cluster.capacity.idle_workers = 1;
  EXPECT_NEAR(queue.PredictWait(r), 0.2, 1e-9);
  r.ttft_slo = milliseconds(1000);
  EXPECT_NE(queue.Submit(std::move(r)).verdict, Verdict::kRejected);
  // With a request waiting ahead of it, the idle worker is that one's first.
  cluster.free = 0;
  queue.Submit(Request("ahead", "A", 100));
  EXPECT_GT(queue.PredictWait(Request("next", "A", 100)), 0.2 + 0.05);
}

TEST_F(AdmissionQueueTest, TheDrainRateBoundsThePredictionWhenTheQueueMovesSlowerThanPrefill) {
  cluster.capacity.tokens_per_second = 1e6;  // prefill is not what limits this cluster
  cluster.capacity.workers = 1;
  for (int i = 0; i < 20; ++i) queue.Submit(Request("a" + std::to_string(i), "A", 100));
  // Two requests (200 tokens) start in two seconds of backlog: 100 tokens a second.
  now += seconds(1);
  cluster.free = 1;
  queue.Pump();
  now += seconds(1);
  cluster.free = 1;
  queue.Pump();
  AdmissionRequest r = Request("late", "A", 100);
  // 18 * 100 queued at 100 tokens/s, then its own 100 at the worker's 1e6 tokens/s.
  EXPECT_NEAR(queue.PredictWait(r), 18.0 + 1e-4, 1e-9);
}

TEST_F(AdmissionQueueTest, AQueueThatDoesNotMoveAtAllPredictsAnEndlessWait) {
  cluster.capacity.tokens_per_second = 1000;
  queue.Submit(Request("stuck", "A"));
  now += seconds(2);
  AdmissionRequest r = Request("next", "B");
  r.ttft_slo = milliseconds(5000);
  const Admission a = queue.Submit(std::move(r));
  EXPECT_EQ(a.verdict, Verdict::kRejected);
  EXPECT_GE(a.retry_after_s, 1);
}

// A step's fixed cost counts for the work in the workers and for each request ahead: a profile
// with no cost per token (every step 0.5 s) still shows its queue.
TEST_F(AdmissionQueueTest, AStepsFixedCostCountsForEachRequestAheadAndInTheWorkers) {
  cluster.capacity.tokens_per_second = 1e9;  // no cost per token
  cluster.capacity.step_seconds = 0.5;
  cluster.capacity.workers = 2;
  cluster.capacity.queued_prompt_seconds = 0.6;  // what the two workers still have to do
  for (int i = 0; i < 4; ++i) queue.Submit(Request("a" + std::to_string(i), "A", 100));
  // 4 requests ahead at 0.5 s over 2 workers, 0.3 s in the workers, then its own step.
  EXPECT_NEAR(queue.PredictWait(Request("next", "A", 100)), 1.0 + 0.3 + 0.5, 1e-6);
}

// Long prompts: a head that has waited less than two of its prompts' times on a worker has been
// waiting out a step, not a stalled queue; longer than that without a start, it has stalled.
TEST_F(AdmissionQueueTest, AQueueOfLongPromptsStallsOnlyAfterTwoOfItsPromptsTimes) {
  cluster.capacity.tokens_per_second = 500;  // one worker: a 1000-token prompt takes 2 s
  cluster.capacity.workers = 1;
  cluster.capacity.queued_prompt_seconds = 2;  // 1000 tokens
  queue.Submit(Request("head", "A", 1000));
  now += seconds(3);
  EXPECT_NEAR(queue.PredictWait(Request("next", "A", 1000)), (1000 + 1000) / 500.0 + 2.0, 1e-9);
  now += seconds(2);
  EXPECT_TRUE(std::isinf(queue.PredictWait(Request("next", "A", 1000))))
      << "5 s without a start: the queue does not move";
}

}  // namespace
}  // namespace pdserve::router
