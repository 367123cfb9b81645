// GatewayMetrics' recent inter-token latency, which the planner reads: the first latency, then an
// exponentially weighted mean in which each new one weighs 5%; and the overflow count the planner
// adds to admission's refusals.
#include "gateway/gateway_metrics.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

TEST(GatewayMetricsTest, RecentInterTokenIsAWeightedMeanOfTheLatestLatencies) {
  GatewayMetrics m;
  EXPECT_EQ(m.RecentInterToken(), 0) << "no traffic";
  m.RecordInterToken(0.1);
  EXPECT_DOUBLE_EQ(m.RecentInterToken(), 0.1);
  m.RecordInterToken(0.3);
  EXPECT_DOUBLE_EQ(m.RecentInterToken(), 0.95 * 0.1 + 0.05 * 0.3);
  for (int i = 0; i < 200; ++i) m.RecordInterToken(0.02);
  EXPECT_NEAR(m.RecentInterToken(), 0.02, 1e-5);
}

TEST(GatewayMetricsTest, OnlyOverflowForAPredictedMissCountsAsRefusedDemand) {
  GatewayMetrics m;
  EXPECT_EQ(m.Overflowed(), 0);
  m.RecordExternal("openai", "predicted_wait");
  m.RecordExternal("openai", "predicted_wait");
  m.RecordExternal("other", "retry");  // a second try of a request already counted
  m.RecordExternalError("openai");
  EXPECT_EQ(m.Overflowed(), 2);
}

}  // namespace
}  // namespace pdserve::gateway
