// The cost model's arithmetic (docs/architecture.md, "Cost model"): GPU-hour prices, step shares
// by tokens (prefill) and equally (decode), egress across zones.
#include "ledger/cost_model.h"

#include <gtest/gtest.h>

#include <numeric>

namespace pdserve::gateway {
namespace {

TEST(CostModelTest, ComputeCostIsSecondsTimesGpusTimesHourlyPrice) {
  WorkerRef w{7, "w", "decode", kReservedClass, "", 3.6, 4};
  EXPECT_DOUBLE_EQ(ComputeCostUsd(10, w), 10 * 4 * 3.6 / 3600);
  EXPECT_DOUBLE_EQ(ComputeCostUsd(3600, w), 14.4);
  EXPECT_EQ(ComputeCostUsd(0, w), 0);
}

TEST(CostModelTest, PrefillStepIsSharedByTokensDecodeStepEqually) {
  auto shares = PrefillStepShares(1.0, {100, 300, 0});
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_DOUBLE_EQ(shares[0], 0.25);
  EXPECT_DOUBLE_EQ(shares[1], 0.75);
  EXPECT_EQ(shares[2], 0);
  auto zero = PrefillStepShares(0.9, {0, 0, 0});
  EXPECT_DOUBLE_EQ(std::accumulate(zero.begin(), zero.end(), 0.0), 0.9);
  EXPECT_TRUE(PrefillStepShares(1.0, {}).empty());
  EXPECT_DOUBLE_EQ(DecodeStepShare(0.03, 3), 0.01);
  EXPECT_EQ(DecodeStepShare(0.03, 0), 0);
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
