// Step cost without sockets: which StepReports can be charged, what ChargeStep charges each
// attempt's prefill and decode side (prefill, decode, colocated and mixed steps, requests the
// worker holds no part of, all-zero steps), and a worker's billing period: where it starts
// (billed_from), its busy seconds, and how often a running worker's period is reported.
#include "router/step_cost.h"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <vector>

namespace pdserve::router {
namespace {

using namespace std::chrono_literals;

constexpr double kEps = 1e-12;

proto::StepReport Step(double seconds, const std::vector<uint64_t>& ids,
                       const std::vector<int32_t>& tokens, const std::vector<bool>& prompt) {
  proto::StepReport s;
  s.set_seconds(seconds);
  for (uint64_t id : ids) s.add_request_ids(id);
  for (int32_t t : tokens) s.add_tokens(t);
  for (bool p : prompt) s.add_prompt(p);
  return s;
}

AttemptUsage Usage(uint64_t id, uint64_t prefill_worker, uint64_t decode_worker) {
  AttemptUsage u;
  u.attempt_id = id;
  u.prefill_worker = prefill_worker;
  u.decode_worker = decode_worker;
  return u;
}

// The attempts a worker holds, by request id, as ChargeStep looks them up.
HeldAttempt Held(std::map<uint64_t, AttemptUsage>& attempts) {
  return [&attempts](uint64_t id) -> AttemptUsage* {
    auto it = attempts.find(id);
    return it == attempts.end() ? nullptr : &it->second;
  };
}

TEST(WellFormedStepTest, CountsMustMatchTheRequestsAndSecondsMustBeANumber) {
  EXPECT_TRUE(WellFormedStep(Step(0.5, {1, 2}, {10, 0}, {true, false})));
  EXPECT_TRUE(WellFormedStep(Step(0, {}, {}, {})));
  EXPECT_FALSE(WellFormedStep(Step(0.5, {1, 2}, {10}, {true, true})));
  EXPECT_FALSE(WellFormedStep(Step(0.5, {1, 2}, {10, 30}, {true})));
  EXPECT_FALSE(WellFormedStep(Step(0.5, {1, 2}, {-10, 30}, {true, true})));
  EXPECT_FALSE(WellFormedStep(Step(-0.1, {1}, {1}, {true})));
  EXPECT_FALSE(WellFormedStep(Step(std::numeric_limits<double>::quiet_NaN(), {1}, {1}, {true})));
  EXPECT_FALSE(WellFormedStep(Step(std::numeric_limits<double>::infinity(), {1}, {1}, {true})));
}

// Disaggregated: prefill worker 1 and decode worker 2 serve attempts 10 and 11.
TEST(ChargeStepTest, APrefillStepIsSharedByPromptTokensAndADecodeStepEqually) {
  std::map<uint64_t, AttemptUsage> attempts{{10, Usage(10, 1, 2)}, {11, Usage(11, 1, 2)}};
  EXPECT_NEAR(ChargeStep(1, Step(0.8, {10, 11}, {10, 30}, {true, true}), Held(attempts)), 0.8,
              kEps);
  EXPECT_NEAR(attempts[10].prefill_step_seconds, 0.2, kEps);
  EXPECT_NEAR(attempts[11].prefill_step_seconds, 0.6, kEps);
  EXPECT_EQ(attempts[10].decode_step_seconds, 0);
  // On the decode worker every share is decode work, prompt flag or not.
  EXPECT_NEAR(ChargeStep(2, Step(0.06, {10, 11}, {1, 1}, {false, true}), Held(attempts)), 0.06,
              kEps);
  EXPECT_NEAR(attempts[10].decode_step_seconds, 0.03, kEps);
  EXPECT_NEAR(attempts[11].decode_step_seconds, 0.03, kEps);
  EXPECT_NEAR(attempts[11].prefill_step_seconds, 0.6, kEps) << "unchanged by the decode step";
  // A step in which neither ran a token is shared equally.
  ChargeStep(2, Step(0.09, {10, 11}, {0, 0}, {false, false}), Held(attempts));
  EXPECT_NEAR(attempts[10].decode_step_seconds, 0.03 + 0.045, kEps);
}

// The share of a request the worker holds no part of is charged to no one and not returned:
// it stays the worker's idle time.
TEST(ChargeStepTest, ARequestTheWorkerDoesNotHoldIsChargedToNoOne) {
  std::map<uint64_t, AttemptUsage> attempts{{1, Usage(1, 5, 6)}};
  EXPECT_NEAR(ChargeStep(5, Step(1.0, {1, 999}, {10, 10}, {true, true}), Held(attempts)), 0.5,
              kEps);
  EXPECT_NEAR(attempts[1].prefill_step_seconds, 0.5, kEps);
  EXPECT_EQ(ChargeStep(5, Step(1.0, {999}, {10}, {true}), Held(attempts)), 0);
  EXPECT_EQ(ChargeStep(5, Step(1.0, {}, {}, {}), Held(attempts)), 0);
}

// Colocated (worker 3 is both sides of attempts 20 and 21): a mixed step's prompt part goes to
// the prefill side, its decode part to the decode side.
TEST(ChargeStepTest, AColocatedStepChargesPromptWorkToPrefillAndTheRestToDecode) {
  std::map<uint64_t, AttemptUsage> attempts{{20, Usage(20, 3, 3)}, {21, Usage(21, 3, 3)}};
  EXPECT_NEAR(ChargeStep(3, Step(0.52, {20, 21}, {12, 1}, {true, false}), Held(attempts)), 0.52,
              kEps);
  EXPECT_NEAR(attempts[20].prefill_step_seconds, 0.48, kEps);
  EXPECT_EQ(attempts[20].decode_step_seconds, 0);
  EXPECT_NEAR(attempts[21].decode_step_seconds, 0.04, kEps);
  EXPECT_EQ(attempts[21].prefill_step_seconds, 0);
}

TEST(WorkerBillingPeriodTest, StartsAtBilledFromOnlyWhenThatIsEarlier) {
  const auto joined = std::chrono::system_clock::time_point(1000s);
  proto::Register info;
  info.set_name("w");
  EXPECT_EQ(WorkerBillingPeriod(1, info, joined, std::nullopt).start(), joined);
  EXPECT_EQ(WorkerBillingPeriod(1, info, joined, joined - 42s).start(), joined - 42s);
  EXPECT_EQ(WorkerBillingPeriod(1, info, joined, joined + 5s).start(), joined);
  const WorkerPeriodUpdate u =
      WorkerBillingPeriod(7, info, joined, joined - 42s).Update(joined + 3s, true);
  EXPECT_EQ(u.worker_id, 7u);
  EXPECT_EQ(u.info.name(), "w");
  EXPECT_EQ(u.start, joined - 42s);
  EXPECT_EQ(u.last_seen, joined + 3s);
  EXPECT_TRUE(u.ended);
}

// What a period says it was busy is what its steps charged to attempts.
TEST(WorkerBillingPeriodTest, ItsBusySecondsAreWhatItsStepsCharged) {
  const auto joined = std::chrono::system_clock::time_point(1000s);
  WorkerBillingPeriod period(1, proto::Register(), joined, std::nullopt);
  std::map<uint64_t, AttemptUsage> attempts{{1, Usage(1, 1, 2)}, {2, Usage(2, 1, 2)}};
  period.AddBusy(ChargeStep(1, Step(0.8, {1, 2}, {10, 30}, {true, true}), Held(attempts)));
  period.AddBusy(ChargeStep(1, Step(1.0, {1, 999}, {10, 10}, {true, true}), Held(attempts)));
  EXPECT_NEAR(period.busy_seconds(), 0.8 + 0.5, kEps);
  EXPECT_NEAR(period.Update(joined + 10s, false).busy_seconds, 1.3, kEps);
  EXPECT_NEAR(attempts[1].prefill_step_seconds + attempts[2].prefill_step_seconds,
              period.busy_seconds(), kEps);
}

TEST(WorkerBillingPeriodTest, ARunningWorkersPeriodIsReportedAtMostOnceASecond) {
  const auto joined = std::chrono::system_clock::time_point(1000s);
  WorkerBillingPeriod period(1, proto::Register(), joined, joined - 60s);
  EXPECT_FALSE(period.DueForUpdate(joined + 999ms)) << "counted from joining, not billed_from";
  EXPECT_TRUE(period.DueForUpdate(joined + 1s));
  EXPECT_FALSE(period.DueForUpdate(joined + 1500ms));
  EXPECT_TRUE(period.DueForUpdate(joined + 2100ms));
  EXPECT_FALSE(period.DueForUpdate(joined + 3s));
}

}  // namespace
}  // namespace pdserve::router
