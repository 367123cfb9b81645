// PostgresLeadership against a throwaway PostgreSQL server (tests/throwaway_postgres.h): one of
// several gateways leads; when it goes (its object, or its session ended by the server) another
// leads within a check or two, and never two at once.
#include "ledger/postgres_leadership.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "tests/eventually.h"
#include "tests/throwaway_postgres.h"

namespace pdserve::ledger {
namespace {

using pdserve::testing::Eventually;
using namespace std::chrono_literals;

class PostgresLeadershipTest : public testing::PostgresFixture {
 protected:
  std::unique_ptr<PostgresLeadership> Gateway() {
    return std::make_unique<PostgresLeadership>(uri_, 10s, 100ms);
  }
};

TEST_F(PostgresLeadershipTest, OneLeadsAndAnotherTakesOverWhenItGoes) {
  auto a = Gateway();
  ASSERT_TRUE(Eventually([&] { return a->Lead(); }, 5s));
  auto b = Gateway();
  auto c = Gateway();
  std::this_thread::sleep_for(500ms);  // five checks each
  EXPECT_TRUE(a->Lead());
  EXPECT_FALSE(b->Lead());
  EXPECT_FALSE(c->Lead());
  a.reset();  // its session ends, and the lock with it
  ASSERT_TRUE(Eventually([&] { return b->Lead() || c->Lead(); }, 2s));
  std::this_thread::sleep_for(300ms);
  EXPECT_NE(b->Lead(), c->Lead()) << "two lead at once";
}

TEST_F(PostgresLeadershipTest, ALeaderWhoseSessionTheServerEndedLeadsNoLonger) {
  auto a = Gateway();
  ASSERT_TRUE(Eventually([&] { return a->Lead(); }, 5s));
  auto b = Gateway();
  std::this_thread::sleep_for(300ms);
  ASSERT_FALSE(b->Lead());
  const std::string database = uri_.substr(uri_.rfind('/') + 1);
  // Every session of the database ends, as on a failover: whoever takes the lock next leads,
  // and never both.
  const auto killed =
      server_->Psql(database,
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = "
                    "current_database() AND pid <> pg_backend_pid()");
  ASSERT_EQ(killed.exit_code, 0) << killed.out;
  // Within a check each finds its session gone (a leads no longer), then one takes the lock.
  std::this_thread::sleep_for(500ms);
  ASSERT_TRUE(Eventually([&] { return a->Lead() != b->Lead(); }, 5s));
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(a->Lead() && b->Lead()) << "two lead at once";
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace
}  // namespace pdserve::ledger
