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
  EXPECT_FALSE(asks.Claim("decode", CapacityClass::kReserved))
      << "reserved workers are the operator's";
  EXPECT_FALSE(asks.Claim("both", CapacityClass::kBurst)) << "colocated workers are in no pool";
  EXPECT_EQ(asks.Claim("decode", CapacityClass::kBurst), t0);
  EXPECT_EQ(asks.Claim("prefill", CapacityClass::kBurst), t0 + 5s);
  EXPECT_EQ(asks.Claim("decode", CapacityClass::kBurst), t0 + 10s);
  EXPECT_FALSE(asks.Claim("decode", CapacityClass::kBurst)) << "nobody asked for a third";
}

TEST(BurstAsksTest, AStepDownWithdrawsTheNewestAndStaleAsksGoOldestFirst) {
  BurstAsks asks;
  const BurstAsks::TimePoint t0 = std::chrono::system_clock::now();
  for (int i = 0; i < 4; ++i) asks.Asked(Pool::kDecode, t0 + std::chrono::seconds(i));
  asks.Withdrawn(Pool::kDecode);  // t0 + 3s
  EXPECT_EQ(asks.outstanding(Pool::kDecode), 3);
  asks.KeepAtMost(Pool::kDecode, 1);  // t0 and t0 + 1s go
  EXPECT_EQ(asks.outstanding(Pool::kDecode), 1);
  EXPECT_EQ(asks.Claim("decode", CapacityClass::kBurst), t0 + 2s);
  asks.KeepAtMost(Pool::kDecode, -2);
  asks.Withdrawn(Pool::kDecode);
  EXPECT_EQ(asks.outstanding(Pool::kDecode), 0);
}

TEST(BurstAsksTest, TheNextArrivalIsTheOldestAskPlusTheMeasuredColdStart) {
  BurstAsks::TimePoint now = std::chrono::system_clock::now();
  BurstAsks asks(20s, [&] { return now; });
  EXPECT_FALSE(asks.NextArrival(Pool::kPrefill)) << "nothing asked for";
  const BurstAsks::TimePoint t0 = now;
  asks.Asked(Pool::kPrefill, t0);
  asks.Asked(Pool::kPrefill, t0 + 1s);
  EXPECT_EQ(asks.NextArrival(Pool::kPrefill), t0 + 20s) << "the assumed cold start";
  // It registers after 8 s: the pool's cold start is measured, and the next ask's due at +9 s.
  now = t0 + 8s;
  EXPECT_EQ(asks.Claim("prefill", CapacityClass::kBurst), t0);
  EXPECT_EQ(asks.ColdStart(Pool::kPrefill), 8s);
  EXPECT_EQ(asks.NextArrival(Pool::kPrefill), t0 + 9s);
  // Overdue: due now, not in the past; overdue by a whole cold start again: not counted on.
  now = t0 + 12s;
  EXPECT_EQ(asks.NextArrival(Pool::kPrefill), now);
  now = t0 + 18s;
  EXPECT_FALSE(asks.NextArrival(Pool::kPrefill));
  // The median of the last measured: 8, 2 and 17 s give 8 s.
  asks.Asked(Pool::kPrefill, now - 2s);
  asks.Asked(Pool::kPrefill, now);
  EXPECT_EQ(asks.NextArrival(Pool::kPrefill), now + 6s) << "the next ask, not the lost one";
  ASSERT_TRUE(asks.Claim("prefill", CapacityClass::kBurst));  // t0 + 1s, after 17 s
  EXPECT_EQ(asks.ColdStart(Pool::kPrefill), 12500ms) << "8 and 17 s: numpy's median, between";
  ASSERT_TRUE(asks.Claim("prefill", CapacityClass::kBurst));  // now - 2s, after 2 s
  EXPECT_EQ(asks.ColdStart(Pool::kPrefill), 8s);
  EXPECT_FALSE(asks.NextArrival(Pool::kDecode)) << "the decode pool asked for nothing";
}

TEST(BurstAsksTest, AnUnknownColdStartPredictsNoArrival) {
  BurstAsks asks;  // no estimate
  asks.Asked(Pool::kPrefill, std::chrono::system_clock::now());
  EXPECT_FALSE(asks.NextArrival(Pool::kPrefill));
}

}  // namespace
}  // namespace pdserve::gateway
