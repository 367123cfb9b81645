#include "model/row_range.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace pdserve::model {
namespace {

TEST(RowRange, TheOwnerTakesPiecesFromTheFrontInOrder) {
  RowRange r;
  r.Reset(10, 70);
  int n0, n1;
  ASSERT_TRUE(r.TakeFront(24, &n0, &n1));
  EXPECT_EQ(n0, 10);
  EXPECT_EQ(n1, 34);
  ASSERT_TRUE(r.TakeFront(24, &n0, &n1));
  EXPECT_EQ(n0, 34);
  EXPECT_EQ(n1, 58);
  ASSERT_TRUE(r.TakeFront(24, &n0, &n1));
  EXPECT_EQ(n0, 58);
  EXPECT_EQ(n1, 70);
  EXPECT_FALSE(r.TakeFront(24, &n0, &n1));
}

TEST(RowRange, PiecesShrinkInWholeUnitsTowardTheEndWhenAMinimumIsGiven) {
  RowRange r;
  r.Reset(0, 250);
  int n0, n1;
  std::vector<int> sizes;
  int next = 0;
  while (r.TakeFront(96, 24, &n0, &n1)) {
    EXPECT_EQ(n0, next);
    next = n1;
    sizes.push_back(n1 - n0);
  }
  EXPECT_EQ(next, 250);
  // 250 left: 96; 154: half is 77, so 72; 82: 24 (41 rounds down to 24); 58: 24; 34: 24; 10: 10.
  EXPECT_EQ(sizes, (std::vector<int>{96, 72, 24, 24, 24, 10}));
}

TEST(RowRange, AThiefTakesTheBackHalfAtAUnitBoundaryFromTheFront) {
  RowRange r;
  r.Reset(0, 100);
  int n0, n1;
  ASSERT_TRUE(r.StealBack(24, &n0, &n1));
  EXPECT_EQ(n0, 72);  // the owner keeps 50 rounded up to 72
  EXPECT_EQ(n1, 100);
  ASSERT_TRUE(r.StealBack(24, &n0, &n1));
  EXPECT_EQ(n0, 48);  // 72 left: the owner keeps 36 rounded up to 48
  EXPECT_EQ(n1, 72);
  ASSERT_TRUE(r.StealBack(24, &n0, &n1));
  EXPECT_EQ(n0, 24);
  EXPECT_EQ(n1, 48);
  ASSERT_TRUE(r.StealBack(24, &n0, &n1));  // one unit left: all of it
  EXPECT_EQ(n0, 0);
  EXPECT_EQ(n1, 24);
  EXPECT_FALSE(r.StealBack(24, &n0, &n1));
  EXPECT_FALSE(r.TakeFront(24, &n0, &n1));
}

TEST(RowRange, EmptyAndReversedRangesHandOutNothing) {
  RowRange r;
  int n0, n1;
  EXPECT_FALSE(r.TakeFront(24, &n0, &n1));  // a new range is empty
  r.Reset(5, 5);
  EXPECT_FALSE(r.TakeFront(24, &n0, &n1));
  EXPECT_FALSE(r.StealBack(24, &n0, &n1));
  r.Reset(9, 3);
  EXPECT_FALSE(r.TakeFront(24, &n0, &n1));
  EXPECT_FALSE(r.StealBack(24, &n0, &n1));
}

// An owner and three thieves at once: every row is handed out exactly once, and the owner's
// pieces keep the unit grid.
TEST(RowRange, EveryRowGoesToExactlyOneThreadUnderContention) {
  constexpr int kRows = 100000, kUnit = 24;
  for (int round = 0; round < 20; ++round) {
    RowRange r;
    r.Reset(0, kRows);
    std::vector<std::atomic<int>> taken(kRows);
    std::atomic<bool> misaligned{false};
    auto mark = [&](int n0, int n1) {
      for (int i = n0; i < n1; ++i) taken[i].fetch_add(1, std::memory_order_relaxed);
    };
    std::vector<std::thread> threads;
    threads.emplace_back([&] {
      int n0, n1;
      while (r.TakeFront(kUnit, &n0, &n1)) {
        if (n0 % kUnit != 0) misaligned = true;
        mark(n0, n1);
      }
    });
    for (int thief = 0; thief < 3; ++thief) {
      threads.emplace_back([&] {
        int n0, n1;
        while (r.StealBack(kUnit, &n0, &n1)) {
          if (n0 % kUnit != 0) misaligned = true;
          mark(n0, n1);
        }
      });
    }
    for (auto& t : threads) t.join();
    EXPECT_FALSE(misaligned);
    for (int i = 0; i < kRows; ++i) ASSERT_EQ(taken[i].load(), 1) << "row " << i;
  }
}

}  // namespace
}  // namespace pdserve::model
