// The cost model's arithmetic (docs/architecture.md, "Cost model"): GPU-hour prices, an attempt's
// cost, egress across zones. How steps are shared among attempts is the registry's
// (tests/router/step_shares_test.cc).
#include "ledger/cost_model.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

TEST(CostModelTest, ComputeCostIsSecondsTimesGpusTimesHourlyPrice) {
  WorkerRef w{7, "w", "decode", kReservedClass, "", 3.6, 4};
  EXPECT_DOUBLE_EQ(ComputeCostUsd(10, w), 10 * 4 * 3.6 / 3600);
  EXPECT_DOUBLE_EQ(ComputeCostUsd(3600, w), 14.4);
  EXPECT_EQ(ComputeCostUsd(0, w), 0);
}

TEST(CostModelTest, EgressOnlyAcrossNamedZones) {
  WorkerRef a{1, "a", "prefill", kBurstClass, "us-east-1a", 1, 1};
  WorkerRef b{2, "b", "decode", kBurstClass, "us-east-1b", 1, 1};
  WorkerRef same = a, unnamed = b;
  same.id = 3;
  unnamed.zone = "";
  EXPECT_DOUBLE_EQ(EgressCostUsd(2'000'000'000, a, b, 0.01), 0.02);
  EXPECT_EQ(EgressCostUsd(2'000'000'000, a, same, 0.01), 0);
  EXPECT_EQ(EgressCostUsd(2'000'000'000, a, unnamed, 0.01), 0);
}

TEST(CostModelTest, AttemptCostAddsBothPhasesAndEgress) {
  WorkerRef p{1, "p", "prefill", kReservedClass, "", 2.0, 1};
  WorkerRef d{2, "d", "decode", kBurstClass, "", 4.0, 2};
  AttemptCost c = PriceAttempt(1.8, p, 0.9, d, 0.5);
  EXPECT_DOUBLE_EQ(c.prefill_usd, 0.001);
  EXPECT_DOUBLE_EQ(c.decode_usd, 0.002);
  EXPECT_DOUBLE_EQ(c.total(), 0.503);
}

}  // namespace
}  // namespace pdserve::gateway
