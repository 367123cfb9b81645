// BurstAsks: a burst worker of a pool claims the oldest ask of its pool; reserved and colocated
// workers, and burst workers nobody asked for, claim nothing; a step down withdraws the newest
// ask; asks beyond the workers still to come are dropped, the oldest first.
#include "gateway/burst_asks.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

using planner::Pool;
using namespace std::chrono_literals;

TEST(BurstAsksTest, ABurstWorkerClaimsTheOldestAskOfItsPool) {
  BurstAsks asks;
  const BurstAsks::TimePoint t0 = std::chrono::system_clock::now();
  asks.Asked(Pool::kDecode, t0);
  asks.Asked(Pool::kDecode, t0 + 10s);
  asks.Asked(Pool::kPrefill, t0 + 5s);
  EXPECT_FALSE(asks.Claim("decode", "reserved")) << "reserved workers are the operator's";
  EXPECT_FALSE(asks.Claim("both", "burst")) << "colocated workers are in no pool";
  EXPECT_EQ(asks.Claim("decode", "burst"), t0);
  EXPECT_EQ(asks.Claim("prefill", "burst"), t0 + 5s);
  EXPECT_EQ(asks.Claim("decode", "burst"), t0 + 10s);
  EXPECT_FALSE(asks.Claim("decode", "burst")) << "nobody asked for a third";
}

TEST(BurstAsksTest, AStepDownWithdrawsTheNewestAndStaleAsksGoOldestFirst) {
  BurstAsks asks;
  const BurstAsks::TimePoint t0 = std::chrono::system_clock::now();
  for (int i = 0; i < 4; ++i) asks.Asked(Pool::kDecode, t0 + std::chrono::seconds(i));
  asks.Withdrawn(Pool::kDecode);  // t0 + 3s
  EXPECT_EQ(asks.outstanding(Pool::kDecode), 3);
  asks.KeepAtMost(Pool::kDecode, 1);  // t0 and t0 + 1s go
  EXPECT_EQ(asks.outstanding(Pool::kDecode), 1);
  EXPECT_EQ(asks.Claim("decode", "burst"), t0 + 2s);
  asks.KeepAtMost(Pool::kDecode, -2);
  asks.Withdrawn(Pool::kDecode);
  EXPECT_EQ(asks.outstanding(Pool::kDecode), 0);
}

}  // namespace
}  // namespace pdserve::gateway
