// ActuationLoop with a recording actuator: a changed count is applied at once, off the caller's
// thread; counts wanted while one is applied coalesce into the latest; a failure is tried again
// after the retry interval; a count that holds is applied again every reapply interval; and
// destruction waits for a call in progress.
#include "planner/actuation_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace pdserve::planner {
namespace {

using namespace std::chrono_literals;

class RecordingActuator : public Actuator {
 public:
  Status SetBurstWorkers(Pool pool, int count) override {
    ++started;
    std::this_thread::sleep_for(delay);
    std::lock_guard lock(mu);
    calls.emplace_back(pool, count);
    orders_seen.push_back(order);
    return failures-- > 0 ? Unavailable("orchestrator down") : Status::Ok();
  }
  void SetDrainOrder(Pool, std::vector<std::string> names) override {
    std::lock_guard lock(mu);
    order = std::move(names);
  }
  std::string Describe() const override { return "recording"; }
  std::vector<std::pair<Pool, int>> Calls() {
    std::lock_guard lock(mu);
    return calls;
  }
  std::mutex mu;
  std::vector<std::pair<Pool, int>> calls;
  std::vector<std::string> order;                     // the latest SetDrainOrder
  std::vector<std::vector<std::string>> orders_seen;  // the order at each SetBurstWorkers
  std::atomic<int> failures{0};
  std::atomic<int> started{0};  // calls begun (a call records itself when it ends)
  std::chrono::milliseconds delay{0};
};

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit = 5s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Each call is preceded by the latest drain order wanted, even when only the order changed.
TEST(ActuationLoopTest, TheLatestDrainOrderGoesBeforeEachCall) {
  auto actuator = std::make_shared<RecordingActuator>();
  ActuationLoopOptions o;
  o.reapply = 50ms;
  ActuationLoop loop(actuator, o);
  loop.Want(Pool::kDecode, 2, {"a:1", "b:2"});
  ASSERT_TRUE(WaitFor([&] { return loop.state(Pool::kDecode).applied == 2; }));
  loop.Want(Pool::kDecode, 2, {"b:2"});
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(actuator->mu);
    return !actuator->orders_seen.empty() &&
           actuator->orders_seen.back() == std::vector<std::string>{"b:2"};
  }));
  std::lock_guard lock(actuator->mu);
  EXPECT_EQ(actuator->orders_seen.front(), (std::vector<std::string>{"a:1", "b:2"}));
}

TEST(ActuationLoopTest, AppliesAChangedCountOnceAndCoalescesWhileBusy) {
  auto actuator = std::make_shared<RecordingActuator>();
  actuator->delay = 200ms;
  ActuationLoopOptions o;
  o.reapply = 1h;
  ActuationLoop loop(actuator, o);
  const auto start = std::chrono::steady_clock::now();
  loop.Want(Pool::kDecode, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 100ms) << "Want must not wait";
  std::this_thread::sleep_for(50ms);  // the loop is in the call for 1
  loop.Want(Pool::kDecode, 2);
  loop.Want(Pool::kDecode, 3);
  ASSERT_TRUE(WaitFor([&] { return loop.state(Pool::kDecode).applied == 3; }));
  loop.Want(Pool::kDecode, 3);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(actuator->Calls(),
            (std::vector<std::pair<Pool, int>>{{Pool::kDecode, 1}, {Pool::kDecode, 3}}));
}

TEST(ActuationLoopTest, AFailureIsTriedAgainAfterTheRetryInterval) {
  auto actuator = std::make_shared<RecordingActuator>();
  actuator->failures = 2;
  ActuationLoopOptions o;
  o.retry = 100ms;
  o.reapply = 1h;
  std::atomic<int> errors{0};
  o.on_result = [&](Pool, int, const Status& s) { errors += !s.ok(); };
  ActuationLoop loop(actuator, o);
  loop.Want(Pool::kPrefill, 2);
  ASSERT_TRUE(WaitFor([&] { return loop.state(Pool::kPrefill).failures == 1; }));
  EXPECT_NE(loop.state(Pool::kPrefill).last_error.find("orchestrator down"), std::string::npos);
  EXPECT_EQ(loop.state(Pool::kPrefill).applied, -1);
  ASSERT_TRUE(WaitFor([&] { return loop.state(Pool::kPrefill).applied == 2; }));
  EXPECT_EQ(errors, 2);
  EXPECT_EQ(loop.state(Pool::kPrefill).failures, 0);
  EXPECT_EQ(actuator->Calls().size(), 3u);
}

TEST(ActuationLoopTest, AHeldCountIsAppliedAgainEveryReapplyInterval) {
  auto actuator = std::make_shared<RecordingActuator>();
  ActuationLoopOptions o;
  o.reapply = 100ms;
  ActuationLoop loop(actuator, o);
  loop.Want(Pool::kDecode, 1);
  ASSERT_TRUE(WaitFor([&] { return actuator->Calls().size() >= 3; }));
  for (const auto& call : actuator->Calls()) EXPECT_EQ(call.second, 1);
}

TEST(ActuationLoopTest, DestructionWaitsForTheCallInProgress) {
  auto actuator = std::make_shared<RecordingActuator>();
  actuator->delay = 300ms;
  {
    ActuationLoop loop(actuator);
    loop.Want(Pool::kDecode, 4);
    // Destroyed while the call is in progress (waiting for it to begin, not a fixed sleep: on a
    // loaded machine the loop's thread may take longer than any sleep to start it).
    ASSERT_TRUE(WaitFor([&] { return actuator->started.load() == 1; }));
  }
  EXPECT_EQ(actuator->Calls().size(), 1u);
}

}  // namespace
}  // namespace pdserve::planner
