// Tests for gateway/overflow_policy.h: each moment's choice and reason, and what keeps a request
// on self-hosted workers.
#include "gateway/overflow_policy.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

using Where = RouteChoice::Where;

RouteFacts Facts(RouteMoment moment, router::OverflowRule rule = router::OverflowRule::kOverflow) {
  RouteFacts f;
  f.moment = moment;
  f.rule = rule;
  f.upstreams_configured = true;
  f.picked_upstream = 1;
  return f;
}

TEST(OverflowPolicyTest, ACheapestRequestLeavesAtArrivalOnlyWhenTheUpstreamIsCheaper) {
  RouteFacts f = Facts(RouteMoment::kArrival, router::OverflowRule::kCheapest);
  f.self_hosted_usd = 0.02;
  f.upstream_usd = 0.01;
  RouteChoice c = ChooseRoute(f);
  EXPECT_EQ(c.where, Where::kExternal);
  EXPECT_EQ(c.upstream, 1);
  EXPECT_EQ(c.reason, "cheapest");
  f.upstream_usd = 0.03;
  EXPECT_EQ(ChooseRoute(f).where, Where::kSelfHosted);
  f.upstream_usd = 0.01;
  f.self_hosted_usd.reset();  // nothing charged lately: it stays
  EXPECT_EQ(ChooseRoute(f).where, Where::kSelfHosted);
  f.self_hosted_usd = 0.02;
  f.rule = router::OverflowRule::kOverflow;  // only `cheapest` compares prices
  EXPECT_EQ(ChooseRoute(f).where, Where::kSelfHosted);
}

TEST(OverflowPolicyTest, ARefusedRequestGoesToItsUpstreamUnlessABurstWorkerIsDue) {
  RouteFacts f = Facts(RouteMoment::kRefused);
  RouteChoice c = ChooseRoute(f);
  EXPECT_EQ(c.where, Where::kExternal);
  EXPECT_EQ(c.reason, "predicted_wait");
  f.burst_due_in_time = true;
  EXPECT_EQ(ChooseRoute(f).where, Where::kWaitForBurst);
}

TEST(OverflowPolicyTest, ARefusedRequestWithNowhereToGoSaysWhy) {
  RouteFacts f = Facts(RouteMoment::kRefused);
  f.why_not_external = "its tenant is pinned to zones";
  RouteChoice c = ChooseRoute(f);
  EXPECT_EQ(c.where, Where::kNowhere);
  EXPECT_EQ(c.reason, "it cannot go to an external upstream: its tenant is pinned to zones");
  f.why_not_external.clear();
  f.picked_upstream = -1;
  f.why_no_upstream = "a is cooling down";
  EXPECT_EQ(ChooseRoute(f).reason, "no external upstream can take it: a is cooling down");
  f.upstreams_configured = false;
  EXPECT_EQ(ChooseRoute(f).reason, "no external upstream is configured");
}

TEST(OverflowPolicyTest, AtItsOverflowTimeItLeavesOrWaitsOn) {
  RouteFacts f = Facts(RouteMoment::kOverflowTime);
  EXPECT_EQ(ChooseRoute(f).reason, "queue_wait");
  f.burst_due_in_time = true;
  EXPECT_EQ(ChooseRoute(f).where, Where::kWaitForBurst);
  f.burst_due_in_time = false;
  f.picked_upstream = -1;
  EXPECT_EQ(ChooseRoute(f).where, Where::kSelfHosted);
}

TEST(OverflowPolicyTest, AFailedUpstreamIsFollowedByAnotherElseWorkers) {
  RouteFacts f = Facts(RouteMoment::kExternalFailed);
  RouteChoice c = ChooseRoute(f);
  EXPECT_EQ(c.where, Where::kExternal);
  EXPECT_EQ(c.reason, "retry");
  f.picked_upstream = -1;
  EXPECT_EQ(ChooseRoute(f).where, Where::kSelfHosted);
}

TEST(OverflowPolicyTest, ATenantWithoutOverflowRightsNeverLeaves) {
  for (RouteMoment m : {RouteMoment::kArrival, RouteMoment::kOverflowTime}) {
    RouteFacts f = Facts(m, router::OverflowRule::kNever);
    f.self_hosted_usd = 1;
    f.upstream_usd = 0;
    EXPECT_EQ(ChooseRoute(f).where, Where::kSelfHosted);
  }
  EXPECT_EQ(ChooseRoute(Facts(RouteMoment::kRefused, router::OverflowRule::kNever)).where,
            Where::kNowhere);
}

}  // namespace
}  // namespace pdserve::gateway
