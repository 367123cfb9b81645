// PostgresBudgets against a throwaway PostgreSQL server (tests/throwaway_postgres.h): a bucket
// starts full, refills by the database's clock, and two gateways' connections taking from it at
// once never take more than it holds.
#include "ledger/postgres_budgets.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "tests/throwaway_postgres.h"

namespace pdserve::ledger {
namespace {

using PostgresBudgetsTest = testing::PostgresFixture;

TEST_F(PostgresBudgetsTest, ABucketStartsFullGivesWhatItHoldsAndRefillsByTheMinute) {
  auto budgets = PostgresBudgets::Open(uri_);
  ASSERT_TRUE(budgets.ok()) << budgets.status().ToString();
  EXPECT_DOUBLE_EQ((*budgets)->Take("acme", "requests", 600, 400).value(), 400);
  const double rest = (*budgets)->Take("acme", "requests", 600, 400).value();
  EXPECT_GE(rest, 200);  // what was left, and what refilled meanwhile (10 a second)
  EXPECT_LT(rest, 210);
  EXPECT_LT((*budgets)->Take("acme", "requests", 600, 400).value(), 5);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const double refilled = (*budgets)->Take("acme", "requests", 600, 400).value();
  EXPECT_GE(refilled, 4.5);  // half a second of 10 a second
  EXPECT_LT(refilled, 10);
  // Another tenant's and another kind's buckets are their own.
  EXPECT_DOUBLE_EQ((*budgets)->Take("other", "requests", 600, 50).value(), 50);
  EXPECT_DOUBLE_EQ((*budgets)->Take("acme", "tokens", 1000, 1000).value(), 1000);
}

TEST_F(PostgresBudgetsTest, GatewaysTakingAtOnceNeverTakeMoreThanTheBucketHolds) {
  std::vector<std::thread> gateways;
  std::atomic<double> taken{0};
  std::atomic<int> failures{0};
  const auto start = std::chrono::steady_clock::now();
  for (int g = 0; g < 4; ++g) {
    gateways.emplace_back([&] {
      auto budgets = PostgresBudgets::Open(uri_);
      if (!budgets.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < 200; ++i) {
        auto got = (*budgets)->Take("acme", "requests", 60, 1);
        if (!got.ok()) {
          ++failures;
          continue;
        }
        double seen = taken.load();
        while (!taken.compare_exchange_weak(seen, seen + *got)) {
        }
      }
    });
  }
  for (auto& g : gateways) g.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(failures.load(), 0);
  // 800 asks of one: the full bucket (60) and one a second while they ran.
  EXPECT_LE(taken.load(), 60 + seconds + 1e-9);
  EXPECT_GE(taken.load(), 60);
}

}  // namespace
}  // namespace pdserve::ledger
