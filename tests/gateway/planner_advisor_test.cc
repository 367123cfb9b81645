// The planner's signals as the gateway reads them from its registry's snapshot and its queue:
// workers counted by pool and class (draining and colocated ones in no pool), decode KV use
// over the decode pool only, the queue in both pools, the inter-token latency in decode, the
// longest a burst worker has been idle.
#include "gateway/planner_advisor.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

using planner::Pool;

router::WorkerLoad Load(const std::string& role, const std::string& capacity_class,
                        int kv_pages = 0, int free_pages = 0, bool draining = false) {
  router::WorkerLoad w;
  w.role = role;
  w.capacity_class = *ParseWorkerCapacityClass(capacity_class);
  w.kv_pages = kv_pages;
  w.free_pages = free_pages;
  w.draining = draining;
  return w;
}

TEST(PlannerAdvisorTest, PoolSignalsCountWorkersByPoolAndClassAndDecodeKvUse) {
  const std::vector<router::WorkerLoad> workers = {
      Load("prefill", "reserved", 1000, 1000),
      Load("prefill", "burst", 1000, 0),
      Load("prefill", "burst", 0, 0, /*draining=*/true),
      Load("decode", "reserved", 100, 25),
      Load("decode", "burst", 300, 75),
      Load("both", "reserved", 500, 0)};
  const auto s = PoolSignalsFrom(workers, /*queued=*/7, /*predicted_wait_s=*/1.25, /*itl_s=*/0.04);
  const planner::PoolSignals& p = s.at(Pool::kPrefill);
  const planner::PoolSignals& d = s.at(Pool::kDecode);
  EXPECT_EQ(p.reserved, 1);
  EXPECT_EQ(p.burst, 1) << "the draining one is on its way out";
  EXPECT_EQ(d.reserved, 1);
  EXPECT_EQ(d.burst, 1);
  EXPECT_DOUBLE_EQ(p.predicted_ttft_s, 1.25);
  EXPECT_DOUBLE_EQ(d.kv_use, 300.0 / 400.0) << "decode pages only: prefill and colocated aside";
  EXPECT_EQ(p.queued_requests, 7);
  EXPECT_EQ(d.queued_requests, 7);
  EXPECT_DOUBLE_EQ(d.itl_s, 0.04);
  EXPECT_EQ(p.starting, 0);
  const auto none = PoolSignalsFrom({}, 0, 0, 0);
  EXPECT_EQ(none.at(Pool::kDecode).kv_use, 0);
  EXPECT_EQ(none.at(Pool::kDecode).unloaded_itl_s, 0) << "unmeasured";
}

// The decode pool's unloaded ITL is its median decode worker's unloaded step: prefill and
// colocated workers aside, and workers not measured yet too.
TEST(PlannerAdvisorTest, UnloadedItlIsTheMedianDecodeWorkers) {
  std::vector<router::WorkerLoad> workers = {
      Load("decode", "reserved"), Load("decode", "reserved"),  Load("decode", "burst"),
      Load("decode", "burst"),    Load("prefill", "reserved"), Load("both", "reserved")};
  workers[0].unloaded_decode_step_seconds = 0.03;
  workers[1].unloaded_decode_step_seconds = 0.01;
  workers[2].unloaded_decode_step_seconds = 0.02;
  workers[4].unloaded_decode_step_seconds = 5;
  workers[5].unloaded_decode_step_seconds = 5;
  EXPECT_DOUBLE_EQ(PoolSignalsFrom(workers, 0, 0, 0).at(Pool::kDecode).unloaded_itl_s, 0.02);
}

// Burst workers asked for and not registered are starting (the planner waits for them), until the
// start timeout after the step up: an actuator that never acts must not freeze the pool.
TEST(PlannerAdvisorTest, WorkersAskedForAndNotRegisteredAreStartingUntilTheTimeout) {
  using std::chrono::seconds;
  EXPECT_EQ(StartingWorkers(2, 0, seconds(10), seconds(300)), 2);
  EXPECT_EQ(StartingWorkers(2, 1, seconds(10), seconds(300)), 1);
  EXPECT_EQ(StartingWorkers(2, 2, seconds(10), seconds(300)), 0);
  EXPECT_EQ(StartingWorkers(1, 3, seconds(10), seconds(300)), 0) << "more registered than asked";
  EXPECT_EQ(StartingWorkers(2, 0, seconds(300), seconds(300)), 0) << "past the start timeout";
}

TEST(PlannerAdvisorTest, BurstIdleIsTheLongestIdleBurstWorkerOfThePool) {
  std::vector<router::WorkerLoad> workers = {Load("decode", "reserved"), Load("decode", "burst"),
                                             Load("decode", "burst"), Load("prefill", "burst")};
  workers[0].idle_seconds = 500;  // reserved: not let go for idling
  workers[1].idle_seconds = 12;
  workers[2].idle_seconds = 40;
  workers[3].idle_seconds = 0;  // holds a request
  const auto s = PoolSignalsFrom(workers, 0, 0, 0);
  EXPECT_DOUBLE_EQ(s.at(Pool::kDecode).burst_idle_s, 40);
  EXPECT_DOUBLE_EQ(s.at(Pool::kPrefill).burst_idle_s, 0);
}

// The order the actuator lets burst workers go in: the pool's burst workers, the idlest first;
// reserved, draining and other pools' workers are not in it.
TEST(PlannerAdvisorTest, TheDrainOrderIsThePoolsBurstWorkersIdlestFirst) {
  std::vector<router::WorkerLoad> workers = {
      Load("decode", "reserved"), Load("decode", "burst"),
      Load("decode", "burst"),    Load("decode", "burst", 0, 0, /*draining=*/true),
      Load("prefill", "burst"),   Load("decode", "burst")};
  const char* names[] = {"r:1", "b:2", "b:3", "d:4", "p:5", "b:6"};
  const double idle[] = {900, 5, 40, 800, 700, 0};
  for (size_t i = 0; i < workers.size(); ++i) {
    workers[i].name = names[i];
    workers[i].idle_seconds = idle[i];
  }
  EXPECT_EQ(DrainOrder(workers, Pool::kDecode), (std::vector<std::string>{"b:3", "b:2", "b:6"}));
  EXPECT_EQ(DrainOrder(workers, Pool::kPrefill), (std::vector<std::string>{"p:5"}));
}

}  // namespace
}  // namespace pdserve::gateway
