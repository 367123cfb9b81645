#include "gateway/tenant_quota.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

namespace pdserve::gateway {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A clock the test moves by hand.
struct FakeClock {
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  TenantQuota::Clock fn() {
    return [this] { return now; };
  }
};

TEST(TenantQuotaTest, TenantsWithoutLimitsAreNeverRefused) {
  FakeClock clock;
  TenantQuota quota({{"capped", {1, 0}}}, {}, clock.fn());
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(quota.Admit("free", 1 << 20).admitted);
}

TEST(TenantQuotaTest, RequestsPerMinuteBurstThenRefillAtTheSteadyRate) {
  FakeClock clock;
  TenantQuota quota({{"acme", {60, 0}}}, {}, clock.fn());
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(quota.Admit("acme", 10).admitted) << i;
  QuotaDecision refused = quota.Admit("acme", 10);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, "requests");
  EXPECT_EQ(refused.retry_after_s, 1);  // 60 per minute: one more each second
  EXPECT_NE(refused.message.find("'acme'"), std::string::npos) << refused.message;
  EXPECT_NE(refused.message.find("requests per min (RPM): Limit 60"), std::string::npos)
      << refused.message;

  clock.now += milliseconds(500);
  EXPECT_FALSE(quota.Admit("acme", 10).admitted);  // half a request's worth refilled
  clock.now += milliseconds(500);
  EXPECT_TRUE(quota.Admit("acme", 10).admitted);
  EXPECT_FALSE(quota.Admit("acme", 10).admitted);

  clock.now += seconds(3600);  // refills to the minute's limit, no more
  for (int i = 0; i < 60; ++i) ASSERT_TRUE(quota.Admit("acme", 10).admitted) << i;
  EXPECT_FALSE(quota.Admit("acme", 10).admitted);
}

TEST(TenantQuotaTest, TokensPerMinuteCountWhatARequestMayUseAndSayWhenItFits) {
  FakeClock clock;
  TenantQuota quota({{"acme", {0, 1200}}}, {}, clock.fn());
  EXPECT_TRUE(quota.Admit("acme", 1000).admitted);
  QuotaDecision refused = quota.Admit("acme", 500);  // 200 left; 300 more take 15 s at 20/s
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, "tokens");
  EXPECT_EQ(refused.retry_after_s, 15);
  EXPECT_NE(refused.message.find("tokens per min (TPM): Limit 1200, Used 1000, Requested 500"),
            std::string::npos)
      << refused.message;
  EXPECT_TRUE(quota.Admit("acme", 200).admitted);  // a refusal took nothing: 200 still fit

  clock.now += seconds(14);  // 280 refilled
  EXPECT_FALSE(quota.Admit("acme", 300).admitted);
  clock.now += seconds(1);
  EXPECT_TRUE(quota.Admit("acme", 300).admitted);
}

TEST(TenantQuotaTest, ARequestLargerThanTheMinuteIsRefusedOutright) {
  FakeClock clock;
  TenantQuota quota({{"acme", {0, 100}}}, {}, clock.fn());
  QuotaDecision refused = quota.Admit("acme", 101);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, "tokens");
  EXPECT_EQ(refused.retry_after_s, 60);
  EXPECT_NE(refused.message.find("Request too large for tenant 'acme'"), std::string::npos);
  EXPECT_TRUE(quota.Admit("acme", 100).admitted);  // and charged nothing
}

TEST(TenantQuotaTest, BothLimitsMustHoldAndTheLongerWaitIsNamed) {
  FakeClock clock;
  TenantQuota quota({{"acme", {2, 600}}}, {}, clock.fn());
  EXPECT_TRUE(quota.Admit("acme", 590).admitted);
  // One request left, but 10 tokens: 50 tokens wait 4 s; the request limit does not bind.
  QuotaDecision refused = quota.Admit("acme", 50);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, "tokens");
  EXPECT_EQ(refused.retry_after_s, 4);
  EXPECT_TRUE(quota.Admit("acme", 10).admitted);
  // No request left (30 s to the next), no tokens left (2 s for 20): requests named, 30 s.
  refused = quota.Admit("acme", 20);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, "requests");
  EXPECT_EQ(refused.retry_after_s, 30);
}

TEST(TenantQuotaTest, TenantsHaveTheirOwnBucketsAndUnlistedOnesGetTheDefault) {
  FakeClock clock;
  TenantQuota quota({{"big", {100, 0}}}, TenantLimits{1, 0}, clock.fn());
  EXPECT_EQ(quota.LimitsFor("big").requests_per_minute, 100);
  EXPECT_EQ(quota.LimitsFor("other").requests_per_minute, 1);
  EXPECT_TRUE(quota.Admit("a", 1).admitted);
  EXPECT_FALSE(quota.Admit("a", 1).admitted);
  EXPECT_TRUE(quota.Admit("b", 1).admitted);  // a's spending is not b's
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(quota.Admit("big", 1).admitted);
  EXPECT_FALSE(quota.Admit("big", 1).admitted);
}

TEST(TenantQuotaTest, ConcurrentAdmissionsNeverExceedTheLimit) {
  FakeClock clock;
  TenantQuota quota({{"acme", {1000, 0}}}, {}, clock.fn());
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) admitted += quota.Admit("acme", 1).admitted;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 1000);
}

// The shared buckets as ledger/postgres_budgets.h keeps them, in memory, on the test's clock.
struct FakeSharedBudgets {
  FakeClock* clock;
  bool down = false;
  std::map<std::pair<std::string, std::string>, std::pair<double, double>> buckets;  // level, at
  int leases = 0;
  TenantQuota::Lease fn() {
    return [this](const std::string& tenant, const std::string& kind, double per_minute,
                  double want) -> Result<double> {
      if (down) return Unavailable("fake budgets: down");
      ++leases;
      const double now = std::chrono::duration<double>(clock->now.time_since_epoch()).count();
      auto [it, fresh] = buckets.try_emplace({tenant, kind}, per_minute, now);
      auto& [level, at] = it->second;
      if (!fresh) level = std::min(per_minute, level + (now - at) * per_minute / 60);
      at = now;
      const double granted = std::min(want, std::max(0.0, level));
      level -= granted;
      return granted;
    };
  }
};

TEST(TenantQuotaTest, GatewaysSharingBudgetsAllowTheLimitOnceNotOncePerGateway) {
  FakeClock clock;
  FakeSharedBudgets store{&clock};
  // Two gateways, 600 requests a minute (10 a second), each offered 20 a second for 2 minutes.
  TenantQuota a({{"acme", {600, 0}}}, {}, clock.fn(), store.fn());
  TenantQuota b({{"acme", {600, 0}}}, {}, clock.fn(), store.fn());
  int admitted = 0, in_second_minute = 0;
  for (int tick = 0; tick < 2400; ++tick) {  // every 50 ms
    for (TenantQuota* q : {&a, &b}) {
      if (q->Admit("acme", 0).admitted) {
        ++admitted;
        in_second_minute += tick >= 1200;
      }
    }
    clock.now += milliseconds(50);
  }
  // The first minute: the full bucket (600) and its refill (600); the second: the refill only
  // (600). Each gateway on its own buckets would have admitted twice that.
  EXPECT_LE(admitted, 1800 + 2);  // plus at most 100 ms of the limit leased by each
  EXPECT_GE(admitted, 1790);
  EXPECT_LE(in_second_minute, 600 + 2);
  EXPECT_GE(in_second_minute, 590);
}

TEST(TenantQuotaTest, AGatewayLimitsAloneWhileTheSharedBudgetsFailAndSharesOnceTheyAnswer) {
  FakeClock clock;
  FakeSharedBudgets store{&clock};
  TenantQuota q({{"acme", {60, 0}}}, {}, clock.fn(), store.fn());
  store.down = true;
  int admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += q.Admit("acme", 0).admitted;
  EXPECT_EQ(admitted, 60);  // its own bucket: a minute's limit, then refused
  const QuotaDecision refused = q.Admit("acme", 0);
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.limit, "requests");
  store.down = false;
  clock.now += seconds(1);
  admitted = 0;
  for (int i = 0; i < 100; ++i) admitted += q.Admit("acme", 0).admitted;
  // The shared bucket, full (nothing of it was taken while it failed), and what was left here.
  EXPECT_GE(admitted, 60);
  EXPECT_LE(admitted, 61);
}

}  // namespace
}  // namespace pdserve::gateway
