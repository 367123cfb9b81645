// Ledger: real SQLite files under the build's test-tmp. Round trips every field, filters, the
// schema checks, forgetting a tenant, concurrent appends and a row surviving kill -9.
#include "ledger/ledger.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "tests/model/random_model.h"

namespace pdserve::ledger {
namespace {

using model::testing::TempDir;

WorkerRef Worker(uint64_t id, CapacityClass cls, double price, int gpus = 1) {
  return {id, "w" + std::to_string(id), "both", cls, "zone-a", price, gpus};
}

AttemptRow Row(const std::string& id, const std::string& tenant, double end, int attempt = 1) {
  AttemptRow r;
  r.request_id = id;
  r.attempt = attempt;
  r.tenant = tenant;
  r.model = "tiny";
  r.endpoint = "chat";
  r.status = AttemptStatus::kOk;
  r.finish_reason = "stop";
  r.arrival_unix = end - 2;
  r.first_token_unix = end - 1;
  r.end_unix = end;
  r.prompt_tokens = 10;
  r.completion_tokens = 5;
  r.prefill_worker = Worker(1, CapacityClass::kReserved, 2.0);
  r.decode_worker = Worker(2, CapacityClass::kBurst, 3.5, 2);
  r.prefill_step_seconds = 0.25;
  r.decode_step_seconds = 0.5;
  r.cost = {0.0003, 0.0005, 0, 0.0002};
  return r;
}

LedgerFilter Filter(std::optional<std::string> tenant, std::optional<double> from = {},
                    std::optional<double> to = {}, std::map<std::string, std::string> tags = {}) {
  LedgerFilter f;
  f.tenant = std::move(tenant);
  f.from_unix = from;
  f.to_unix = to;
  f.tags = std::move(tags);
  return f;
}

std::unique_ptr<Ledger> OpenOrDie(const std::string& path, bool store_text = false) {
  auto ledger = Ledger::Open({path, store_text});
  EXPECT_TRUE(ledger.ok()) << ledger.status().ToString();
  return ledger.ok() ? std::move(*ledger) : nullptr;
}

void RawSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << message;
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

// A ledger as pdserve wrote it before cost parts (schema version 1), with a self-hosted row
// (reserved prefill on 2 GPUs at $3.60/h, burst decode at $7.20/h, KV across zones) and an
// external one (class api), each with the egress and cost the gateway stored then.
constexpr char kVersion1Ledger[] = R"sql(
CREATE TABLE attempts(
  row_id INTEGER PRIMARY KEY,
  request_id TEXT NOT NULL, attempt INTEGER NOT NULL,
  tenant TEXT NOT NULL, model TEXT NOT NULL, endpoint TEXT NOT NULL,
  status TEXT NOT NULL, finish_reason TEXT NOT NULL,
  arrival_unix REAL NOT NULL, first_token_unix REAL NOT NULL, end_unix REAL NOT NULL,
  queue_seconds REAL NOT NULL, prefill_seconds REAL NOT NULL, transfer_seconds REAL NOT NULL,
  decode_seconds REAL NOT NULL,
  prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
  prefill_worker_id INTEGER NOT NULL, prefill_worker_name TEXT NOT NULL,
  prefill_worker_role TEXT NOT NULL, prefill_capacity_class TEXT NOT NULL,
  prefill_zone TEXT NOT NULL, prefill_price_per_gpu_hour REAL NOT NULL,
  prefill_gpu_count INTEGER NOT NULL,
  decode_worker_id INTEGER NOT NULL, decode_worker_name TEXT NOT NULL,
  decode_worker_role TEXT NOT NULL, decode_capacity_class TEXT NOT NULL,
  decode_zone TEXT NOT NULL, decode_price_per_gpu_hour REAL NOT NULL,
  decode_gpu_count INTEGER NOT NULL,
  prefill_step_seconds REAL NOT NULL, decode_step_seconds REAL NOT NULL,
  kv_bytes INTEGER NOT NULL, egress_cost_usd REAL NOT NULL, cost_usd REAL NOT NULL,
  user TEXT NOT NULL, prompt_text TEXT, completion_text TEXT,
  UNIQUE(request_id, attempt));
CREATE INDEX attempts_end ON attempts(end_unix);
CREATE INDEX attempts_tenant_end ON attempts(tenant, end_unix);
CREATE TABLE attempt_tags(
  row_id INTEGER NOT NULL REFERENCES attempts(row_id) ON DELETE CASCADE,
  key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(row_id, key)) WITHOUT ROWID;
CREATE INDEX attempt_tags_key_value ON attempt_tags(key, value);
CREATE TABLE worker_periods(
  period_id TEXT PRIMARY KEY,
  worker_id INTEGER NOT NULL, worker_name TEXT NOT NULL, worker_role TEXT NOT NULL,
  capacity_class TEXT NOT NULL, zone TEXT NOT NULL, price_per_gpu_hour REAL NOT NULL,
  gpu_count INTEGER NOT NULL,
  start_unix REAL NOT NULL, end_unix REAL NOT NULL, busy_seconds REAL NOT NULL);
INSERT INTO attempts VALUES (NULL, 'chatcmpl-old', 1, 'acme', 'tiny', 'chat', 'ok', 'stop',
  10, 11, 12, 0, 0, 0, 0, 1000, 200,
  1, 'p', 'prefill', 'reserved', 'zone-a', 3.6, 2,
  2, 'd', 'decode', 'burst', 'zone-b', 7.2, 1,
  1.5, 4, 3000000000, 0.06, 0.071, 'u', NULL, NULL);
INSERT INTO attempts VALUES (NULL, 'chatcmpl-api', 1, 'beta', 'tiny', 'chat', 'retried', '',
  20, 0, 21, 0, 0, 0, 0, 100, 0,
  0, 'openai', 'api', 'api', '', 0, 0,
  0, 'openai', 'api', 'api', '', 0, 0,
  0, 0, 0, 0, 0.0042, '', NULL, NULL);
PRAGMA application_id=1885631350;
PRAGMA user_version=1;
)sql";

// The first column of the first row `sql` gives, read from the file as an outside reader would.
double RawNumber(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr), SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK) << sql;
  const double value = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_double(stmt, 0) : -1;
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}
double UserVersion(const std::string& path) { return RawNumber(path, "PRAGMA user_version"); }

// The version 1 rows' parts, as ledger.h says they are read: compute by the cost model, egress
// and API tokens as stored, adding up to the stored cost_usd.
void ExpectVersion1Parts(const std::vector<AttemptRow>& rows) {
  ASSERT_EQ(rows.size(), 2u);
  const AttemptCost& old = rows[0].cost;
  EXPECT_EQ(rows[0].request_id, "chatcmpl-old");
  EXPECT_DOUBLE_EQ(old.prefill_compute_usd, 1.5 * 2 * 0.001);
  EXPECT_DOUBLE_EQ(old.decode_compute_usd, 4 * 0.002);
  EXPECT_EQ(old.egress_usd, 0.06);
  EXPECT_EQ(old.api_tokens_usd, 0);
  EXPECT_DOUBLE_EQ(old.total(), 0.071);
  const AttemptCost& api = rows[1].cost;
  EXPECT_EQ(rows[1].status, AttemptStatus::kRetried);
  EXPECT_EQ(rows[1].decode_worker.capacity_class, CapacityClass::kApi);
  EXPECT_EQ(api.prefill_compute_usd + api.decode_compute_usd + api.egress_usd, 0);
  EXPECT_EQ(api.api_tokens_usd, 0.0042);
  EXPECT_EQ(api.total(), 0.0042);
}

TEST(LedgerTest, AVersion1LedgerIsReadAsItIsWithItsPartsFromWhatItsRowsRecorded) {
  TempDir dir;
  RawSql(dir / "v1.db", kVersion1Ledger);
  auto ledger = Ledger::OpenReadOnly(dir / "v1.db");
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  auto rows = (*ledger)->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ExpectVersion1Parts(*rows);
  EXPECT_EQ(UserVersion(dir / "v1.db"), 1);  // reading changes nothing
}

TEST(LedgerTest, OpeningAVersion1LedgerToWriteMigratesItAndKeepsItsRows) {
  TempDir dir;
  RawSql(dir / "v1.db", kVersion1Ledger);
  {
    auto ledger = OpenOrDie(dir / "v1.db");
    ASSERT_TRUE(ledger != nullptr);
    EXPECT_EQ(UserVersion(dir / "v1.db"), 4);
    // A new row's parts are stored as given, not what its usage would price at.
    AttemptRow r = Row("chatcmpl-new", "acme", 30);
    r.cost = {0.25, 0.5, 0.125, 1.0};
    ASSERT_TRUE(ledger->Append(r).ok());
  }
  ASSERT_TRUE(OpenOrDie(dir / "v1.db") != nullptr);  // a second open finds it migrated
  auto ledger = Ledger::OpenReadOnly(dir / "v1.db");
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  auto rows = (*ledger)->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  const AttemptCost stored = rows->back().cost;
  rows->pop_back();
  ExpectVersion1Parts(*rows);
  EXPECT_EQ(stored.prefill_compute_usd, 0.25);
  EXPECT_EQ(stored.decode_compute_usd, 0.5);
  EXPECT_EQ(stored.egress_usd, 0.125);
  EXPECT_EQ(stored.api_tokens_usd, 1.0);
  // Outside readers of the file see the total as cost_usd, as before.
  const std::string where = " FROM attempts WHERE request_id = 'chatcmpl-new'";
  EXPECT_EQ(RawNumber(dir / "v1.db", "SELECT cost_usd" + where), 1.875);
  EXPECT_EQ(RawNumber(dir / "v1.db", "SELECT egress_cost_usd" + where), 0.125);
}

// A version 2 ledger: version 1's rows with the cost part columns, one row's parts stored.
void WriteVersion2Ledger(const std::string& path) {
  RawSql(path, kVersion1Ledger);
  RawSql(path,
         "ALTER TABLE attempts ADD COLUMN prefill_compute_usd REAL; "
         "ALTER TABLE attempts ADD COLUMN decode_compute_usd REAL; "
         "ALTER TABLE attempts ADD COLUMN api_tokens_usd REAL; "
         "UPDATE attempts SET prefill_compute_usd = 0.003, decode_compute_usd = 0.008, "
         "api_tokens_usd = 0 WHERE request_id = 'chatcmpl-old'; PRAGMA user_version=2;");
}

TEST(LedgerTest, AVersion2LedgerReadsNoCachedTokensAndIsLeftAsItIs) {
  TempDir dir;
  WriteVersion2Ledger(dir / "v2.db");
  auto ledger = Ledger::OpenReadOnly(dir / "v2.db");
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  auto rows = (*ledger)->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].cached_prompt_tokens, 0);
  EXPECT_EQ((*rows)[0].cost.prefill_compute_usd, 0.003);
  EXPECT_EQ(UserVersion(dir / "v2.db"), 2);
}

TEST(LedgerTest, OpeningAVersion2LedgerToWriteAddsCachedTokensAndKeepsItsRows) {
  TempDir dir;
  WriteVersion2Ledger(dir / "v2.db");
  {
    auto ledger = OpenOrDie(dir / "v2.db");
    ASSERT_TRUE(ledger != nullptr);
    EXPECT_EQ(UserVersion(dir / "v2.db"), 4);
    AttemptRow r = Row("chatcmpl-new", "acme", 30);
    r.prompt_tokens = 1000;
    r.cached_prompt_tokens = 768;
    ASSERT_TRUE(ledger->Append(r).ok());
  }
  auto rows = OpenOrDie(dir / "v2.db")->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].request_id, "chatcmpl-old");
  EXPECT_EQ((*rows)[0].prompt_tokens, 1000);
  EXPECT_EQ((*rows)[0].cached_prompt_tokens, 0);
  EXPECT_EQ((*rows)[0].cost.prefill_compute_usd, 0.003);  // version 2's stored part, kept
  EXPECT_EQ((*rows)[1].cached_prompt_tokens, 0);
  EXPECT_EQ((*rows)[2].request_id, "chatcmpl-new");
  EXPECT_EQ((*rows)[2].cached_prompt_tokens, 768);
  EXPECT_EQ(RawNumber(dir / "v2.db",
                      "SELECT cached_prompt_tokens FROM attempts WHERE request_id = "
                      "'chatcmpl-new'"),
            768);
}

TEST(LedgerTest, ANewLedgerStoresCachedPromptTokens) {
  TempDir dir;
  AttemptRow r = Row("chatcmpl-1", "acme", 10);
  r.cached_prompt_tokens = 42;
  ASSERT_TRUE(OpenOrDie(dir / "l.db")->Append(r).ok());
  auto rows = OpenOrDie(dir / "l.db")->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].cached_prompt_tokens, 42);
  EXPECT_EQ(UserVersion(dir / "l.db"), 4);
}

// A version 3 ledger: version 2's with cached prompt tokens, one row's recorded.
void WriteVersion3Ledger(const std::string& path) {
  WriteVersion2Ledger(path);
  RawSql(path,
         "ALTER TABLE attempts ADD COLUMN cached_prompt_tokens INTEGER NOT NULL DEFAULT 0; "
         "UPDATE attempts SET cached_prompt_tokens = 512 WHERE request_id = 'chatcmpl-old'; "
         "PRAGMA user_version=3;");
}

TEST(LedgerTest, AVersion3LedgerReadsNoPlacementAndIsLeftAsItIs) {
  TempDir dir;
  WriteVersion3Ledger(dir / "v3.db");
  auto ledger = Ledger::OpenReadOnly(dir / "v3.db");
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  auto rows = (*ledger)->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].cached_prompt_tokens, 512);
  EXPECT_EQ((*rows)[0].placement, "");
  EXPECT_EQ((*rows)[0].placement_reason, "");
  EXPECT_EQ(UserVersion(dir / "v3.db"), 3);
}

TEST(LedgerTest, OpeningAVersion3LedgerToWriteAddsPlacementAndKeepsItsRows) {
  TempDir dir;
  WriteVersion3Ledger(dir / "v3.db");
  {
    auto ledger = OpenOrDie(dir / "v3.db");
    ASSERT_TRUE(ledger != nullptr);
    EXPECT_EQ(UserVersion(dir / "v3.db"), 4);
    AttemptRow r = Row("chatcmpl-new", "acme", 30);
    r.placement = "pair";
    r.placement_reason = "pair_faster";
    ASSERT_TRUE(ledger->Append(r).ok());
  }
  auto rows = OpenOrDie(dir / "v3.db")->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].request_id, "chatcmpl-old");
  EXPECT_EQ((*rows)[0].cached_prompt_tokens, 512);  // version 3's, kept
  EXPECT_EQ((*rows)[0].placement, "");
  EXPECT_EQ((*rows)[2].placement, "pair");
  EXPECT_EQ((*rows)[2].placement_reason, "pair_faster");
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
