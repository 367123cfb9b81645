// Ledger schema versions (ledger.h, "Schema versions"): files pdserve wrote at versions 1 to 3,
// read as they are when opened read-only and migrated to the current version, their rows kept,
// when opened for writing; and a new file at the current version.
#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "tests/ledger/ledger_test_support.h"
#include "tests/model/random_model.h"

namespace pdserve::ledger {
namespace {

using model::testing::TempDir;
using namespace test_support;

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
    EXPECT_EQ(UserVersion(dir / "v1.db"), 5);
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
    EXPECT_EQ(UserVersion(dir / "v2.db"), 5);
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
  EXPECT_EQ(UserVersion(dir / "l.db"), 5);
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
    EXPECT_EQ(UserVersion(dir / "v3.db"), 5);
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

// A version 4 ledger: version 3's with placement, one row's recorded.
void WriteVersion4Ledger(const std::string& path) {
  WriteVersion3Ledger(path);
  RawSql(path,
         "ALTER TABLE attempts ADD COLUMN placement TEXT NOT NULL DEFAULT ''; "
         "ALTER TABLE attempts ADD COLUMN placement_reason TEXT NOT NULL DEFAULT ''; "
         "UPDATE attempts SET placement = 'local' WHERE request_id = 'chatcmpl-old'; "
         "PRAGMA user_version=4;");
}

TEST(LedgerTest, AVersion4LedgerReadsNoPredictionsAndIsLeftAsItIs) {
  TempDir dir;
  WriteVersion4Ledger(dir / "v4.db");
  auto ledger = Ledger::OpenReadOnly(dir / "v4.db");
  ASSERT_TRUE(ledger.ok()) << ledger.status().ToString();
  auto rows = (*ledger)->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].placement, "local");
  EXPECT_EQ((*rows)[0].admission, "");
  EXPECT_EQ((*rows)[0].predicted_ttft_seconds, 0);
  EXPECT_EQ(UserVersion(dir / "v4.db"), 4);
}

TEST(LedgerTest, OpeningAVersion4LedgerToWriteAddsPredictionsAndKeepsItsRows) {
  TempDir dir;
  WriteVersion4Ledger(dir / "v4.db");
  {
    auto ledger = OpenOrDie(dir / "v4.db");
    ASSERT_TRUE(ledger != nullptr);
    EXPECT_EQ(UserVersion(dir / "v4.db"), 5);
    AttemptRow r = Row("chatcmpl-new", "acme", 30);
    r.admission = "admitted";
    r.predicted_queue_seconds = 0.25;
    r.predicted_ttft_seconds = 0.75;
    ASSERT_TRUE(ledger->Append(r).ok());
    AttemptRow refused = Row("chatcmpl-refused", "acme", 31);
    refused.status = AttemptStatus::kRefused;
    refused.admission = "refused";
    refused.predicted_ttft_seconds = 9.5;
    ASSERT_TRUE(ledger->Append(refused).ok());
  }
  auto rows = OpenOrDie(dir / "v4.db")->Rows({});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].request_id, "chatcmpl-old");
  EXPECT_EQ((*rows)[0].placement, "local");  // version 4's, kept
  EXPECT_EQ((*rows)[0].admission, "");
  EXPECT_EQ((*rows)[2].admission, "admitted");
  EXPECT_EQ((*rows)[2].predicted_queue_seconds, 0.25);
  EXPECT_EQ((*rows)[2].predicted_ttft_seconds, 0.75);
  EXPECT_EQ((*rows)[3].status, AttemptStatus::kRefused);
  EXPECT_EQ((*rows)[3].admission, "refused");
  EXPECT_EQ((*rows)[3].predicted_ttft_seconds, 9.5);
}

}  // namespace
}  // namespace pdserve::ledger
