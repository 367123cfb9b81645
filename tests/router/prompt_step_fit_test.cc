// A prefill worker's step time fitted as a fixed cost plus a cost per token
// (router/prompt_step_fit.h): exact on steps on a line, the plain ratio with one size of step,
// and recent steps weigh more than old ones.
#include "router/prompt_step_fit.h"

#include <gtest/gtest.h>

namespace pdserve::router {
namespace {

TEST(PromptStepFitTest, StepsOnALineGiveItsSlopeAndIntercept) {
  PromptStepFit fit;
  EXPECT_FALSE(fit.measured());
  EXPECT_EQ(fit.tokens_per_second(), 0);
  // 10 ms a step and 1 ms a token.
  for (int tokens : {16, 200, 64, 512, 1}) fit.Add(tokens, 0.010 + 0.001 * tokens);
  EXPECT_TRUE(fit.measured());
  EXPECT_NEAR(fit.tokens_per_second(), 1000, 1e-6);
  EXPECT_NEAR(fit.step_seconds(), 0.010, 1e-9);
}

TEST(PromptStepFitTest, OneSizeOfStepGivesTheRatioAndNoFixedCost) {
  PromptStepFit fit;
  fit.Add(100, 0.5);
  EXPECT_DOUBLE_EQ(fit.tokens_per_second(), 200);
  EXPECT_EQ(fit.step_seconds(), 0);
  fit.Add(100, 0.5);
  EXPECT_DOUBLE_EQ(fit.tokens_per_second(), 200);
  fit.Add(0, 1.0);  // not a prompt step: ignored
  fit.Add(10, 0);
  EXPECT_DOUBLE_EQ(fit.tokens_per_second(), 200);
}

TEST(PromptStepFitTest, AWorkerThatSlowsDownIsFollowed) {
  PromptStepFit fit;
  for (int i = 0; i < 20; ++i) fit.Add(100 + 10 * (i % 3), 0.001 * (100 + 10 * (i % 3)));
  EXPECT_NEAR(fit.tokens_per_second(), 1000, 1e-3);
  // Now twice as slow: after 30 steps the old ones weigh 0.9^30 (4%) of what they did.
  for (int i = 0; i < 30; ++i) fit.Add(100 + 10 * (i % 3), 0.002 * (100 + 10 * (i % 3)));
  EXPECT_NEAR(fit.tokens_per_second(), 500, 25);
}

}  // namespace
}  // namespace pdserve::router
