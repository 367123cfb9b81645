// The linear percentile against values numpy gives (np.quantile(x, q), its default method).
#include "common/percentile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pdserve {
namespace {

TEST(Percentile, MatchesNumpysLinearDefinition) {
  // np.quantile([1, 2, 3, 4], 0.5) == 2.5: between the middle two, not either of them.
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(Quantile({4, 1, 3, 2}, 0.25), 1.75);
  // np.percentile([15, 20, 35, 40, 50], [40, 90]) == [29.0, 46.0]
  EXPECT_DOUBLE_EQ(Quantile({15, 20, 35, 40, 50}, 0.4), 29.0);
  EXPECT_DOUBLE_EQ(Quantile({50, 40, 35, 20, 15}, 0.9), 46.0);
  // np.percentile([10, 7, 4, 3, 2, 1], 99) == 9.85
  EXPECT_NEAR(Quantile({10, 7, 4, 3, 2, 1}, 0.99), 9.85, 1e-12);
  // np.quantile([3, -1, 2], [0, 1]) == [-1, 3]
  EXPECT_DOUBLE_EQ(Quantile({3, -1, 2}, 0), -1);
  EXPECT_DOUBLE_EQ(Quantile({3, -1, 2}, 1), 3);
  EXPECT_DOUBLE_EQ(Quantile({5}, 0.99), 5);
}

TEST(Percentile, MedianInterpolatesAnEvenCount) {
  EXPECT_DOUBLE_EQ(Median({1, 2, 3, 4}), 2.5);  // nearest rank would say 2 or 3
  EXPECT_DOUBLE_EQ(Median({9, 1, 5}), 5);
  EXPECT_DOUBLE_EQ(Median({0.5, 0.25}), 0.375);
}

TEST(Percentile, SortedInputIsReadAsGiven) {
  const std::vector<double> sorted{1, 2, 4, 8};
  // h = 3 * 0.5 = 1.5: halfway from 2 to 4.
  EXPECT_DOUBLE_EQ(QuantileOfSorted(sorted, 0.5), 3);
  // h = 3 * 0.9 = 2.7: 4 + 0.7 * (8 - 4).
  EXPECT_NEAR(QuantileOfSorted(sorted, 0.9), 6.8, 1e-12);
}

TEST(Percentile, EmptyIsZeroAndQIsClamped) {
  EXPECT_EQ(Quantile({}, 0.5), 0);
  EXPECT_EQ(QuantileOfSorted({}, 0.99), 0);
  EXPECT_EQ(Median({}), 0);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3}, -0.5), 1);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3}, 7), 3);
  EXPECT_TRUE(std::isnan(Quantile({1, 2}, std::numeric_limits<double>::quiet_NaN())));
}

}  // namespace
}  // namespace pdserve
