// Ledger: real SQLite files under the build's test-tmp. Round trips every field, filters, the
// schema checks, forgetting a tenant, concurrent appends and a row surviving kill -9. Older
// schema versions, read and migrated: ledger_schema_test.cc.
#include "ledger/ledger.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "tests/ledger/ledger_test_support.h"
#include "tests/model/random_model.h"

namespace pdserve::ledger {
namespace {

using model::testing::TempDir;
using namespace test_support;

LedgerFilter Filter(std::optional<std::string> tenant, std::optional<double> from = {},
                    std::optional<double> to = {}, std::map<std::string, std::string> tags = {}) {
  LedgerFilter f;
  f.tenant = std::move(tenant);
  f.from_unix = from;
  f.to_unix = to;
  f.tags = std::move(tags);
  return f;
}

TEST(LedgerTest, RoundTripsEveryField) {
  TempDir dir;
  auto ledger = OpenOrDie(dir / "l.db", /*store_text=*/true);
  AttemptRow r = Row("chatcmpl-1", "acme", 1000.5, 2);
  r.status = AttemptStatus::kRetried;
  r.finish_reason = "";
  r.queue_seconds = 0.1;
  r.prefill_seconds = 0.2;
  r.transfer_seconds = 0.3;
  r.decode_seconds = 0.4;
  r.kv_bytes = 123456789012;
  r.cost.egress_usd = 0.0002;
  r.tags = {{"env", "prod"}, {"job", "nightly"}};
  r.user = "user-7";
  r.prompt_text = "hello";
  r.completion_text = "world";
  r.decode_worker.id = (uint64_t{1} << 63) + 5;  // ids use the whole uint64 range
  r.placement = "local";
  r.placement_reason = "local_faster";
  ASSERT_TRUE(ledger->Append(r).ok());

  auto rows = ledger->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  const AttemptRow& g = (*rows)[0];
  EXPECT_EQ(g.request_id, "chatcmpl-1");
  EXPECT_EQ(g.attempt, 2);
  EXPECT_EQ(g.tenant, "acme");
  EXPECT_EQ(g.model, "tiny");
  EXPECT_EQ(g.endpoint, "chat");
  EXPECT_EQ(g.status, AttemptStatus::kRetried);
  EXPECT_EQ(g.finish_reason, "");
  EXPECT_EQ(g.arrival_unix, 998.5);
  EXPECT_EQ(g.first_token_unix, 999.5);
  EXPECT_EQ(g.end_unix, 1000.5);
  EXPECT_EQ(g.queue_seconds, 0.1);
  EXPECT_EQ(g.prefill_seconds, 0.2);
  EXPECT_EQ(g.transfer_seconds, 0.3);
  EXPECT_EQ(g.decode_seconds, 0.4);
  EXPECT_EQ(g.prompt_tokens, 10);
  EXPECT_EQ(g.completion_tokens, 5);
  EXPECT_EQ(g.prefill_worker.id, 1u);
  EXPECT_EQ(g.prefill_worker.name, "w1");
  EXPECT_EQ(g.prefill_worker.role, "both");
  EXPECT_EQ(g.prefill_worker.capacity_class, CapacityClass::kReserved);
  EXPECT_EQ(g.prefill_worker.zone, "zone-a");
  EXPECT_EQ(g.prefill_worker.price_per_gpu_hour, 2.0);
  EXPECT_EQ(g.decode_worker.id, (uint64_t{1} << 63) + 5);
  EXPECT_EQ(g.decode_worker.capacity_class, CapacityClass::kBurst);
  EXPECT_EQ(g.decode_worker.gpu_count, 2);
  EXPECT_EQ(g.prefill_step_seconds, 0.25);
  EXPECT_EQ(g.decode_step_seconds, 0.5);
  EXPECT_EQ(g.kv_bytes, 123456789012);
  EXPECT_EQ(g.cost.prefill_compute_usd, 0.0003);
  EXPECT_EQ(g.cost.decode_compute_usd, 0.0005);
  EXPECT_EQ(g.cost.egress_usd, 0.0002);
  EXPECT_EQ(g.cost.api_tokens_usd, 0.0002);
  EXPECT_EQ(g.tags, r.tags);
  EXPECT_EQ(g.user, "user-7");
  EXPECT_EQ(g.prompt_text, "hello");
  EXPECT_EQ(g.completion_text, "world");
  EXPECT_EQ(g.placement, "local");
  EXPECT_EQ(g.placement_reason, "local_faster");
}

TEST(LedgerTest, StoresNoTextUnlessAsked) {
  TempDir dir;
  auto ledger = OpenOrDie(dir / "l.db");
  AttemptRow r = Row("cmpl-1", "acme", 10);
  r.prompt_text = "secret prompt";
  r.completion_text = "secret completion";
  ASSERT_TRUE(ledger->Append(r).ok());
  auto rows = ledger->Rows({});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].prompt_text, "");
  EXPECT_EQ((*rows)[0].completion_text, "");
  ledger.reset();
  std::ifstream in(dir / "l.db", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(bytes.find("secret"), std::string::npos);
}

TEST(LedgerTest, FiltersByTenantTimeAndEveryTag) {
  TempDir dir;
  auto ledger = OpenOrDie(dir / "l.db");
  AttemptRow a = Row("a", "acme", 100), b = Row("b", "acme", 200), c = Row("c", "beta", 150);
  a.tags = {{"env", "prod"}, {"job", "nightly"}};
  b.tags = {{"env", "prod"}};
  c.tags = {{"env", "dev"}};
  for (const auto& r : {a, b, c}) ASSERT_TRUE(ledger->Append(r).ok());

  auto ids = [&](const LedgerFilter& f) {
    auto rows = ledger->Rows(f);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::string s;
    for (const auto& r : *rows) s += r.request_id;
    return s;
  };
  EXPECT_EQ(ids({}), "acb");  // by end time
  EXPECT_EQ(ids(Filter("acme")), "ab");
  EXPECT_EQ(ids(Filter("nobody")), "");
  EXPECT_EQ(ids(Filter({}, 150)), "cb");
  EXPECT_EQ(ids(Filter({}, 100, 200)), "ac");  // to is exclusive
  EXPECT_EQ(ids(Filter({}, {}, {}, {{"env", "prod"}})), "ab");
  EXPECT_EQ(ids(Filter({}, {}, {}, {{"env", "prod"}, {"job", "nightly"}})), "a");
  EXPECT_EQ(ids(Filter({}, {}, {}, {{"env", "prod'; DROP TABLE attempts; --"}})), "");
  EXPECT_EQ(ids(Filter("beta", {}, {}, {{"env", "dev"}})), "c");
  EXPECT_EQ(ids({}), "acb");
}

TEST(LedgerTest, SameAttemptTwiceIsRefusedAndLeavesNoHalfRow) {
  TempDir dir;
  auto ledger = OpenOrDie(dir / "l.db");
  AttemptRow r = Row("a", "acme", 1);
  ASSERT_TRUE(ledger->Append(r).ok());
  r.tags = {{"env", "x"}};
  Status s = ledger->Append(r);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
  r.attempt = 2;
  EXPECT_TRUE(ledger->Append(r).ok());
  auto rows = ledger->Rows({});
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_TRUE((*rows)[0].tags.empty());
}

TEST(LedgerTest, UpsertPeriodUpdatesItsEndAndBusyTime) {
  TempDir dir;
  auto ledger = OpenOrDie(dir / "l.db");
  WorkerPeriod p{"g1-1", Worker(1, CapacityClass::kReserved, 2.0, 4), 100, 110, 3};
  ASSERT_TRUE(ledger->UpsertPeriod(p).ok());
  p.end_unix = 160;
  p.busy_seconds = 20;
  ASSERT_TRUE(ledger->UpsertPeriod(p).ok());
  ASSERT_TRUE(
      ledger->UpsertPeriod({"g1-2", Worker(2, CapacityClass::kBurst, 5.0), 200, 300, 0}).ok());

  auto all = ledger->Periods(std::nullopt, std::nullopt);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].period_id, "g1-1");
  EXPECT_EQ((*all)[0].start_unix, 100);
  EXPECT_EQ((*all)[0].end_unix, 160);
  EXPECT_EQ((*all)[0].busy_seconds, 20);
  EXPECT_EQ((*all)[0].worker.gpu_count, 4);
  EXPECT_EQ((*all)[0].worker.capacity_class, CapacityClass::kReserved);
  EXPECT_EQ((*all)[1].worker.price_per_gpu_hour, 5.0);

  auto overlapping = ledger->Periods(150.0, 210.0);
  ASSERT_TRUE(overlapping.ok());
  EXPECT_EQ(overlapping->size(), 2u);
  auto late = ledger->Periods(170.0, std::nullopt);
  ASSERT_TRUE(late.ok());
  ASSERT_EQ(late->size(), 1u);
  EXPECT_EQ((*late)[0].period_id, "g1-2");
  auto early = ledger->Periods(std::nullopt, 100.0);  // a period starting at `to` is outside
  ASSERT_TRUE(early.ok());
  EXPECT_TRUE(early->empty());
}

TEST(LedgerTest, ForgetTenantDeletesItsRowsAndTagsOnly) {
  TempDir dir;
  auto ledger = OpenOrDie(dir / "l.db", /*store_text=*/true);
  for (int i = 0; i < 3; ++i) {
    AttemptRow r = Row("a" + std::to_string(i), "acme", i);
    r.tags = {{"team", "search"}};
    r.prompt_text = "acme private text";
    ASSERT_TRUE(ledger->Append(r).ok());
  }
  AttemptRow other = Row("b", "beta", 5);
  other.tags = {{"team", "search"}};
  ASSERT_TRUE(ledger->Append(other).ok());

  auto forgotten = ledger->ForgetTenant("acme");
  ASSERT_TRUE(forgotten.ok()) << forgotten.status().ToString();
  EXPECT_EQ(*forgotten, 3);
  auto again = ledger->ForgetTenant("acme");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 0);
  auto rows = ledger->Rows(Filter({}, {}, {}, {{"team", "search"}}));
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].tenant, "beta");
  ledger.reset();  // checkpoints the WAL into the file

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir / "l.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM attempt_tags", -1, &stmt, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(stmt), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(stmt, 0), 1);  // no orphaned tags
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  std::ifstream in(dir / "l.db", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(bytes.find("acme private text"), std::string::npos);  // secure_delete
}

TEST(LedgerTest, RowSurvivesKillDashNineRightAfterAppend) {
  TempDir dir;
  const std::string path = dir / "l.db";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto ledger = Ledger::Open({path, false});
    if (!ledger.ok() || !(*ledger)->Append(Row("cmpl-kill", "acme", 42)).ok()) ::_exit(3);
    ::kill(::getpid(), SIGKILL);  // no destructor, no checkpoint: only the WAL holds the row
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  auto reader = Ledger::OpenReadOnly(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto rows = (*reader)->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].request_id, "cmpl-kill");
}

TEST(LedgerTest, ConcurrentAppendsAllLand) {
  TempDir dir;
  auto ledger = OpenOrDie(dir / "l.db");
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        AttemptRow r = Row("t" + std::to_string(t) + "-" + std::to_string(i), "acme", i);
        r.tags = {{"thread", std::to_string(t)}};
        EXPECT_TRUE(ledger->Append(r).ok());
      }
    });
  }
  // A reader on its own connection while the writers run.
  auto reader = Ledger::OpenReadOnly(dir / "l.db");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE((*reader)->Rows({}).ok());
  for (auto& t : threads) t.join();
  auto rows = ledger->Rows({});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 240u);
  auto third = (*reader)->Rows(Filter({}, {}, {}, {{"thread", "3"}}));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->size(), 40u);
}

TEST(LedgerTest, ReopenKeepsRowsAndReadOnlyCannotWrite) {
  TempDir dir;
  ASSERT_TRUE(OpenOrDie(dir / "l.db")->Append(Row("a", "acme", 1)).ok());
  ASSERT_TRUE(OpenOrDie(dir / "l.db")->Append(Row("b", "acme", 2)).ok());
  auto reader = Ledger::OpenReadOnly(dir / "l.db");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto rows = (*reader)->Rows({});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 2u);
  EXPECT_FALSE((*reader)->Append(Row("c", "acme", 3)).ok());
}

TEST(LedgerTest, BadPathsAndForeignFilesAreClearErrors) {
  TempDir dir;
  auto missing = Ledger::OpenReadOnly(dir / "nope.db");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.db"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "nope.db"));

  auto no_folder = Ledger::Open({dir / "no/such/folder/l.db", false});
  EXPECT_EQ(no_folder.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_folder.status().message().find("does not exist"), std::string::npos);

  auto a_folder = Ledger::Open({dir.path(), false});
  EXPECT_FALSE(a_folder.ok());

  { std::ofstream(dir / "text.db") << "this is not a database, just some text long enough\n"; }
  for (bool read_only : {false, true}) {
    auto text =
        read_only ? Ledger::OpenReadOnly(dir / "text.db") : Ledger::Open({dir / "text.db", false});
    EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument) << text.status().ToString();
    EXPECT_NE(text.status().message().find("not a pdserve ledger"), std::string::npos)
        << text.status().ToString();
    EXPECT_NE(text.status().message().find("text.db"), std::string::npos);
  }

  RawSql(dir / "other.db", "CREATE TABLE t(x)");
  auto other = Ledger::Open({dir / "other.db", false});
  EXPECT_NE(other.status().message().find("another application"), std::string::npos)
      << other.status().ToString();

  ASSERT_TRUE(OpenOrDie(dir / "future.db") != nullptr);
  RawSql(dir / "future.db", "PRAGMA user_version=99");
  auto future = Ledger::OpenReadOnly(dir / "future.db");
  EXPECT_EQ(future.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(future.status().message().find("newer pdserve"), std::string::npos)
      << future.status().ToString();

  RawSql(dir / "empty.db", "PRAGMA user_version=0");
  auto empty = Ledger::OpenReadOnly(dir / "empty.db");
  EXPECT_NE(empty.status().message().find("not a pdserve ledger"), std::string::npos)
      << empty.status().ToString();
}

TEST(LedgerTest, ARowWithAnUnknownLabelIsAnErrorNamingIt) {
  TempDir dir;
  ASSERT_TRUE(OpenOrDie(dir / "l.db")->Append(Row("chatcmpl-1", "acme", 10)).ok());
  RawSql(dir / "l.db", "UPDATE attempts SET decode_capacity_class = 'spot'");
  auto rows = OpenOrDie(dir / "l.db")->Rows({});
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("'spot'"), std::string::npos) << rows.status().ToString();
  EXPECT_NE(rows.status().message().find("chatcmpl-1"), std::string::npos);
  RawSql(dir / "l.db", "UPDATE attempts SET decode_capacity_class = 'burst', status = 'done'");
  rows = OpenOrDie(dir / "l.db")->Rows({});
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("'done'"), std::string::npos) << rows.status().ToString();
}

TEST(LedgerTest, ParsesUnixSecondsAndIsoTimes) {
  EXPECT_EQ(*ParseTimeArg("1764410400"), 1764410400.0);
  EXPECT_EQ(*ParseTimeArg("1764410400.25"), 1764410400.25);
  EXPECT_EQ(*ParseTimeArg("2026-11-29T10:00:00Z"), 1795946400.0);
  EXPECT_EQ(*ParseTimeArg("2026-11-29T10:00:00.5Z"), 1795946400.5);
  EXPECT_EQ(*ParseTimeArg("2026-11-29T10:00:00+00:00"), 1795946400.0);
  EXPECT_EQ(*ParseTimeArg("2026-11-29"), 1795946400.0 - 36000);
  EXPECT_EQ(FormatUnixTime(1795946400.0), "2026-11-29T10:00:00Z");
  for (const char* bad : {"", "soon", "-5", "2026-02-30T00:00:00Z", "2026-11-29T10:00:00",
                          "2026-11-29T10:00:00+02:00", "2026-13-01", "12abc", "nan", "inf",
                          "1e300"}) {  // the last three: numbers, but no times
    auto r = ParseTimeArg(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("ISO-8601"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace pdserve::ledger
