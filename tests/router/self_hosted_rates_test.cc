#include "router/self_hosted_rates.h"

#include <gtest/gtest.h>

namespace pdserve::router {
namespace {

using Clock = std::chrono::steady_clock;

TEST(SelfHostedRatesTest, NothingIsPredictedUntilBothKindsOfTokenWereCharged) {
  SelfHostedRates rates;
  EXPECT_FALSE(rates.PredictUsd(10, 10).has_value());
  rates.Record(100, 0.01, 0, 0);  // a prefill only
  EXPECT_FALSE(rates.PredictUsd(10, 10).has_value());
  rates.Record(0, 0, 50, 0.02);
  ASSERT_TRUE(rates.PredictUsd(10, 10).has_value());
  rates.Record(0, 0, 0, 0.5);  // no tokens: nothing to learn from
  EXPECT_DOUBLE_EQ(*rates.PredictUsd(10, 10), 10 * 0.01 / 100 + 10 * 0.02 / 50);
}

TEST(SelfHostedRatesTest, RatesAreTheWindowsChargesPerToken) {
  Clock::time_point now{};
  SelfHostedRates rates(std::chrono::seconds(60), [&] { return now; });
  rates.Record(100, 0.1, 10, 0.1);
  now += std::chrono::seconds(30);
  rates.Record(300, 0.1, 30, 0.3);
  // (0.2 USD / 400 prompt tokens, 0.4 USD / 40 completion tokens)
  EXPECT_DOUBLE_EQ(*rates.PredictUsd(40, 4), 40 * 0.2 / 400 + 4 * 0.4 / 40);
  // The first attempt leaves the window; the second's rates remain.
  now += std::chrono::seconds(31);
  EXPECT_DOUBLE_EQ(*rates.PredictUsd(30, 3), 30 * 0.1 / 300 + 3 * 0.3 / 30);
  // Then nothing is known again.
  now += std::chrono::seconds(30);
  EXPECT_FALSE(rates.PredictUsd(30, 3).has_value());
  // Free workers (no price) cost nothing per token.
  rates.Record(10, 0, 10, 0);
  EXPECT_EQ(*rates.PredictUsd(1000, 1000), 0.0);
}

}  // namespace
}  // namespace pdserve::router
