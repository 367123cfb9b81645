// The gamma arrival process: mean gap 1 / rate, coefficient of variation 1 / sqrt(burstiness),
// checked against bounds derived from the sample size.
#include "bench/serve/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pdserve::bench {
namespace {

struct GapStats {
  double mean = 0;
  double cv = 0;
};

GapStats Gaps(const std::vector<double>& offsets) {
  size_t n = offsets.size() - 1;
  double sum = 0, sq = 0;
  for (size_t i = 1; i < offsets.size(); ++i) sum += offsets[i] - offsets[i - 1];
  double mean = sum / n;
  for (size_t i = 1; i < offsets.size(); ++i) sq += std::pow(offsets[i] - offsets[i - 1] - mean, 2);
  return {mean, std::sqrt(sq / (n - 1)) / mean};
}

// For gamma gaps of shape k: the sample mean has standard error mean * cv / sqrt(n); the sample
// standard deviation s has relative standard error about 0.5 * sqrt((2 + 6 / k) / n) (excess
// kurtosis of a gamma is 6 / k), and so has the CV to first order. Bounds are 5 sigma.
void ExpectGammaGaps(double rate, double burstiness, uint64_t seed) {
  const int64_t n = 20000;
  auto offsets = ArrivalOffsets(n + 1, {rate, burstiness, seed});
  ASSERT_TRUE(offsets.ok());
  GapStats stats = Gaps(*offsets);
  double expected_cv = 1 / std::sqrt(burstiness);
  double mean = 1 / rate;
  EXPECT_NEAR(stats.mean, mean, 5 * mean * expected_cv / std::sqrt(n));
  double cv_rel_se = 0.5 * std::sqrt((2 + 6 / burstiness) / n);
  EXPECT_NEAR(stats.cv, expected_cv, 5 * expected_cv * cv_rel_se)
      << "burstiness " << burstiness << " seed " << seed;
}

TEST(Arrivals, PoissonGapsHaveMeanOneOverRateAndCvOne) {
  for (uint64_t seed : {0, 1, 2}) ExpectGammaGaps(50, 1.0, seed);
}

TEST(Arrivals, BurstinessFourGivesCvOneHalf) {
  for (uint64_t seed : {0, 1, 2}) ExpectGammaGaps(50, 4.0, seed);
}

TEST(Arrivals, BurstinessBelowOneIsBurstier) { ExpectGammaGaps(10, 0.25, 3); }

TEST(Arrivals, InfiniteRateSendsAllAtOnceAndSeedsRepeat) {
  auto all = ArrivalOffsets(5, {std::numeric_limits<double>::infinity(), 1.0, 0});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, std::vector<double>(5, 0.0));
  auto a = ArrivalOffsets(100, {10, 1.0, 42});
  auto b = ArrivalOffsets(100, {10, 1.0, 42});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ((*a)[0], 0.0);
  for (size_t i = 1; i < a->size(); ++i) EXPECT_GE((*a)[i], (*a)[i - 1]);
}

TEST(Arrivals, RejectsBadRatesAndBurstiness) {
  EXPECT_FALSE(ArrivalOffsets(3, {0, 1.0, 0}).ok());
  EXPECT_FALSE(ArrivalOffsets(3, {-1, 1.0, 0}).ok());
  EXPECT_FALSE(ArrivalOffsets(3, {std::nan(""), 1.0, 0}).ok());
  EXPECT_FALSE(ArrivalOffsets(3, {1, 0.0, 0}).ok());
}

}  // namespace
}  // namespace pdserve::bench
