#include "model/logprobs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace pdserve::model {
namespace {

TEST(RowLogprobsTest, MatchesADoubleLogSoftmaxAndOrdersTheTop) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> logits(50000);
  for (auto& x : logits) x = normal(rng);
  logits[123] = 30.0f;
  logits[7] = 29.0f;
  double max = -1e300, sum = 0;
  for (float x : logits) max = std::max(max, static_cast<double>(x));
  for (float x : logits) sum += std::exp(x - max);
  const double lse = max + std::log(sum);
  const RowLogprobs row(logits, 5);
  for (int i : {0, 7, 123, 49999}) EXPECT_NEAR(row.Of(logits[i]), logits[i] - lse, 1e-5) << i;
  ASSERT_EQ(row.top().size(), 5u);
  EXPECT_EQ(row.top()[0].first, 123);
  EXPECT_EQ(row.top()[1].first, 7);
  for (size_t k = 1; k < row.top().size(); ++k) {
    EXPECT_GE(row.top()[k - 1].second, row.top()[k].second);
  }
}

TEST(RowLogprobsTest, TiesGoToTheLowerIdAndImpossibleTokensHaveAFiniteFloor) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, -inf, std::nanf("")};
  const RowLogprobs row(logits, 20);
  ASSERT_EQ(row.top().size(), 4u);  // the NaN is left out
  EXPECT_EQ(row.top()[0].first, 1);
  EXPECT_EQ(row.top()[1].first, 2);
  EXPECT_EQ(row.Of(-inf), kImpossibleLogprob);
  EXPECT_EQ(row.top()[3].second, kImpossibleLogprob);
  EXPECT_TRUE(RowLogprobs(logits, 0).top().empty());
}

}  // namespace
}  // namespace pdserve::model
