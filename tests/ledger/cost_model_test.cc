// The cost model's arithmetic (docs/architecture.md, "Cost model"): GPU-hour prices, egress
// across zones, API tokens. How steps are shared among attempts is the registry's
// (tests/router/step_shares_test.cc).
#include "ledger/cost_model.h"

#include <gtest/gtest.h>

namespace pdserve::ledger {
namespace {

TEST(CostModelTest, ComputeCostIsSecondsTimesGpusTimesHourlyPrice) {
  WorkerRef w{7, "w", "decode", CapacityClass::kReserved, "", 3.6, 4};
  EXPECT_DOUBLE_EQ(ComputeCostUsd(10, w), 10 * 4 * 3.6 / 3600);
  EXPECT_DOUBLE_EQ(ComputeCostUsd(3600, w), 14.4);
  EXPECT_EQ(ComputeCostUsd(0, w), 0);
}

TEST(CostModelTest, EgressOnlyAcrossNamedZones) {
  WorkerRef a{1, "a", "prefill", CapacityClass::kBurst, "us-east-1a", 1, 1};
  WorkerRef b{2, "b", "decode", CapacityClass::kBurst, "us-east-1b", 1, 1};
  WorkerRef same = a, unnamed = b;
  same.id = 3;
  unnamed.zone = "";
  EXPECT_DOUBLE_EQ(EgressCostUsd(2'000'000'000, a, b, 0.01), 0.02);
  EXPECT_EQ(EgressCostUsd(2'000'000'000, a, same, 0.01), 0);
  EXPECT_EQ(EgressCostUsd(2'000'000'000, a, unnamed, 0.01), 0);
}

TEST(CostModelTest, ApiTokensAreEachProductRoundedThenSummed) {
  const volatile double input = 1234.0 * 1.5e-07, output = 567.0 * 6e-07;  // not fused
  EXPECT_EQ(ApiTokensCostUsd(1234, 567, 1.5e-07, 6e-07), input + output);
  EXPECT_EQ(ApiTokensCostUsd(0, 0, 1.5e-07, 6e-07), 0);
  EXPECT_EQ(ApiTokensCostUsd(1234, 567, 0, 0), 0);
}

TEST(CostModelTest, CachedPromptTokensArePricedAtTheCachedPriceAndClampedToThePrompt) {
  const volatile double uncached = 234.0 * 2e-06, cached = 1000.0 * 5e-07, out = 567.0 * 8e-06;
  EXPECT_EQ(ApiTokensCostUsd(1234, 1000, 567, 2e-06, 5e-07, 8e-06), uncached + cached + out);
  // None cached: exactly the uncached formula.
  EXPECT_EQ(ApiTokensCostUsd(1234, 0, 567, 2e-06, 5e-07, 8e-06),
            ApiTokensCostUsd(1234, 567, 2e-06, 8e-06));
  // More cached than prompted is the whole prompt cached; fewer than none is none.
  EXPECT_DOUBLE_EQ(ApiTokensCostUsd(100, 500, 0, 2e-06, 5e-07, 0), 100 * 5e-07);
  EXPECT_DOUBLE_EQ(ApiTokensCostUsd(100, -5, 0, 2e-06, 5e-07, 0), 100 * 2e-06);
}

}  // namespace
}  // namespace pdserve::ledger
