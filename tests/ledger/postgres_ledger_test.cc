// PostgresLedger against a throwaway PostgreSQL server (tests/throwaway_postgres.h): the same
// rows, filters, periods and report as the SQLite file, duplicates left out, a dropped connection
// opened again, the schema checks, several gateways creating the schema at once, and the ledger
// commands (report, export, forget) on a postgresql:// location.
#include "ledger/postgres_ledger.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "ledger/ledger_writer.h"
#include "tests/command_run.h"
#include "tests/ledger/ledger_test_support.h"
#include "tests/temp_dir.h"
#include "tests/throwaway_postgres.h"

namespace pdserve::ledger {
namespace {

using namespace test_support;

// Every field of a row, as text with every double's 17 digits.
std::string Fields(const AttemptRow& r) {
  char numbers[1024];
  std::snprintf(numbers, sizeof numbers,
                "%.17g %.17g %.17g %.17g %.17g %.17g %.17g %lld %lld %lld %.17g %.17g %lld "
                "%.17g %.17g %.17g %.17g %.17g %.17g",
                r.arrival_unix, r.first_token_unix, r.end_unix, r.queue_seconds, r.prefill_seconds,
                r.transfer_seconds, r.decode_seconds, static_cast<long long>(r.prompt_tokens),
                static_cast<long long>(r.completion_tokens),
                static_cast<long long>(r.cached_prompt_tokens), r.prefill_step_seconds,
                r.decode_step_seconds, static_cast<long long>(r.kv_bytes),
                r.cost.prefill_compute_usd, r.cost.decode_compute_usd, r.cost.egress_usd,
                r.cost.api_tokens_usd, r.predicted_queue_seconds, r.predicted_ttft_seconds);
  std::string text = r.request_id + "#" + std::to_string(r.attempt) + " " + r.tenant + " " +
                     r.model + " " + r.endpoint + " " + std::string(ToString(r.status)) + " " +
                     r.finish_reason + " " + numbers + " " + r.user + " [" + r.prompt_text + "][" +
                     r.completion_text + "] " + r.placement + " " + r.placement_reason + " " +
                     r.admission;
  for (const WorkerRef* w : {&r.prefill_worker, &r.decode_worker}) {
    char price[40];
    std::snprintf(price, sizeof price, "%.17g", w->price_per_gpu_hour);
    text += " {" + std::to_string(w->id) + " " + w->name + " " + w->role + " " +
            std::string(ToString(w->capacity_class)) + " " + w->zone + " " + price + " " +
            std::to_string(w->gpu_count) + "}";
  }
  for (const auto& [k, v] : r.tags) text += " " + k + "=" + v;
  return text;
}

std::vector<std::string> AllFields(const Result<std::vector<AttemptRow>>& rows) {
  EXPECT_TRUE(rows.ok()) << rows.status().ToString();
  std::vector<std::string> out;
  if (rows.ok()) {
    for (const auto& r : *rows) out.push_back(Fields(r));
  }
  return out;
}

// Rows that use every field and the awkward values: text with quotes and newlines, non-ASCII,
// ids over 2^63, thirds, tiny and huge numbers, the same end time, several tags.
std::vector<AttemptRow> VariedRows() {
  std::vector<AttemptRow> rows;
  for (int i = 0; i < 40; ++i) {
    AttemptRow r = Row("cmpl-" + std::to_string(i % 7) + "-" + std::to_string(i),
                       i % 3 ? "acme" : "o'brien \"co\"", 1000 + i / 4, 1 + i % 2);
    r.status = i % 5 ? AttemptStatus::kOk : AttemptStatus::kRetried;
    r.finish_reason = i % 2 ? "stop" : "length";
    r.queue_seconds = 1.0 / 3 + i;
    r.prefill_seconds = 1e-9 * i;
    r.transfer_seconds = 1e300;
    r.decode_seconds = 0.1 * i;
    r.kv_bytes = int64_t{1} << 40;
    r.cached_prompt_tokens = i % 4;
    r.decode_worker.id = (uint64_t{1} << 63) + i;
    r.decode_worker.zone = "zone-ü";
    r.cost.egress_usd = 0.0002 * i;
    r.cost.api_tokens_usd = i % 6 ? 0 : 0.01;
    r.user = "user\n" + std::to_string(i);
    r.prompt_text = "say \"hi\"\\ 'ok' 😀";
    r.completion_text = "line1\nline2";
    r.placement = i % 2 ? "pair" : "local";
    r.placement_reason = "pair_faster";
    r.admission = "admitted";
    r.predicted_queue_seconds = 0.25;
    r.predicted_ttft_seconds = 0.5 + i;
    if (i % 3 == 0) r.tags = {{"env", "prod"}, {"job", "n" + std::to_string(i % 2)}};
    rows.push_back(r);
  }
  return rows;
}

class PostgresLedgerTest : public testing::PostgresFixture {
 protected:
  std::unique_ptr<Ledger> OpenPg(bool store_text = false) {
    auto ledger = Ledger::Open({uri_, store_text});
    EXPECT_TRUE(ledger.ok()) << ledger.status().ToString();
    return ledger.ok() ? std::move(*ledger) : nullptr;
  }
  std::string Database() const { return uri_.substr(uri_.rfind('/') + 1); }

  testing::TempDir dir_;
};

TEST_F(PostgresLedgerTest, HoldsAndGivesBackTheSameRowsAsTheSqliteFile) {
  auto pg = OpenPg(/*store_text=*/true);
  auto lite = OpenOrDie(dir_ / "l.sqlite", /*store_text=*/true);
  ASSERT_TRUE(pg && lite);
  const auto rows = VariedRows();
  // In two batches and one by one, as the writer and a lone Append give them.
  ASSERT_TRUE(pg->AppendBatch({rows.begin(), rows.begin() + 25}).ok());
  for (size_t i = 25; i < rows.size(); ++i) ASSERT_TRUE(pg->Append(rows[i]).ok());
  ASSERT_TRUE(lite->AppendBatch(rows).ok());

  const auto all = AllFields(pg->Rows({}));
  ASSERT_EQ(all.size(), rows.size());
  EXPECT_EQ(all, AllFields(lite->Rows({})));
  for (const LedgerFilter& f : {LedgerFilter{"acme", {}, {}, {}}, LedgerFilter{{}, 1002, 1007, {}},
                                LedgerFilter{{}, {}, {}, {{"env", "prod"}, {"job", "n1"}}},
                                LedgerFilter{"o'brien \"co\"", 1001, {}, {{"env", "prod"}}}}) {
    const auto some = AllFields(pg->Rows(f));
    EXPECT_FALSE(some.empty());
    EXPECT_LT(some.size(), rows.size());
    EXPECT_EQ(some, AllFields(lite->Rows(f)));
  }
  // Read back exactly: a third, 1e-9 steps and 1e300.
  EXPECT_EQ((*pg->Rows({}))[0].queue_seconds, 1.0 / 3);
}

TEST_F(PostgresLedgerTest, ARowAlreadyThereIsLeftOutAndNamedTheOthersWritten) {
  auto pg = OpenPg();
  ASSERT_TRUE(pg);
  ASSERT_TRUE(pg->Append(Row("a", "t", 1)).ok());
  const Status again = pg->Append(Row("a", "t", 1));
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();
  AttemptRow tagged = Row("b", "t", 2);
  tagged.tags = {{"k", "v"}};
  auto outcome = pg->AppendBatch({Row("a", "t", 1), tagged, tagged, Row("a", "t", 1, 2)});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_EQ(outcome->written, 2);
  EXPECT_EQ(outcome->duplicates, (std::vector<std::string>{"a#1", "b#1"}));
  const auto rows = pg->Rows({}).value();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].tags, tagged.tags);
}

TEST_F(PostgresLedgerTest, PeriodsUpsertAndFilterAsTheSqliteFile) {
  auto pg = OpenPg();
  auto lite = OpenOrDie(dir_ / "p.sqlite");
  ASSERT_TRUE(pg && lite);
  for (Ledger* l : {pg.get(), lite.get()}) {
    for (int i = 0; i < 6; ++i) {
      WorkerPeriod p{"run-" + std::to_string(i), Worker(i + 1, CapacityClass::kBurst, 2.5 + i),
                     100.0 + 10 * i, 105.0 + 10 * i, 1.0 / 7};
      ASSERT_TRUE(l->UpsertPeriod(p).ok());
      p.end_unix += 3;
      p.busy_seconds = 2;
      ASSERT_TRUE(l->UpsertPeriods({p}).ok());
    }
  }
  for (auto [from, to] : {std::pair<std::optional<double>, std::optional<double>>{{}, {}},
                          {120.0, 140.0},
                          {{}, 125.0}}) {
    auto a = pg->Periods(from, to).value(), b = lite->Periods(from, to).value();
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].period_id, b[i].period_id);
      EXPECT_EQ(a[i].end_unix, b[i].end_unix);
      EXPECT_EQ(a[i].busy_seconds, 2.0);
      EXPECT_EQ(a[i].worker.price_per_gpu_hour, b[i].worker.price_per_gpu_hour);
    }
  }
}

TEST_F(PostgresLedgerTest, ForgetTenantDeletesItsRowsAndTagsOnly) {
  auto pg = OpenPg();
  ASSERT_TRUE(pg);
  AttemptRow gone = Row("g", "gone", 1), kept = Row("k", "kept", 2);
  gone.tags = kept.tags = {{"env", "prod"}};
  ASSERT_TRUE(pg->AppendBatch({gone, kept}).ok());
  EXPECT_EQ(pg->ForgetTenant("gone").value(), 1);
  const auto rows = pg->Rows({}).value();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].tenant, "kept");
  EXPECT_EQ(server_->Psql(Database(), "SELECT count(*) FROM attempt_tags").out, "1\n");
}

TEST_F(PostgresLedgerTest, ADroppedConnectionIsOpenedAgainAndTheWriterLosesNothing) {
  auto pg = std::shared_ptr<Ledger>(OpenPg());
  ASSERT_TRUE(pg);
  ASSERT_TRUE(pg->Append(Row("before", "t", 1)).ok());
  // The server ends every other session, as a restart or a failover would.
  const auto killed =
      server_->Psql(Database(),
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                    "datname = current_database() AND pid <> pg_backend_pid()");
  ASSERT_EQ(killed.exit_code, 0) << killed.out;
  LedgerWriterOptions options;
  options.retry_after = std::chrono::milliseconds(10);
  LedgerWriter writer(pg, options);
  for (int i = 0; i < 100; ++i) writer.Append(Row("after" + std::to_string(i), "t", 2 + i));
  ASSERT_TRUE(writer.Flush(std::chrono::seconds(30)));
  EXPECT_EQ(writer.stats().rows_written, 100u);
  EXPECT_EQ(pg->Rows({}).value().size(), 101u);
}

TEST_F(PostgresLedgerTest, SchemaChecksRefuseWhatIsNotThisLedger) {
  // No ledger there: read-only and existing opens say so and create nothing.
  auto read = Ledger::OpenReadOnly(uri_);
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound) << read.status().ToString();
  EXPECT_EQ(Ledger::OpenExisting(uri_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(server_->Psql(Database(), "SELECT to_regclass('attempts') IS NULL").out, "t\n");

  ASSERT_TRUE(OpenPg());
  auto reader = Ledger::OpenReadOnly(uri_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_FALSE((*reader)->Append(Row("x", "t", 1)).ok()) << "a read-only session wrote";

  ASSERT_EQ(server_->Psql(Database(), "UPDATE pdserve_ledger SET schema_version = 9").exit_code, 0);
  auto newer = Ledger::Open({uri_});
  EXPECT_EQ(newer.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(newer.status().message().find("newer pdserve"), std::string::npos)
      << newer.status().ToString();
  ASSERT_EQ(server_->Psql(Database(), "UPDATE pdserve_ledger SET application = 'other'").exit_code,
            0);
  EXPECT_EQ(Ledger::Open({uri_}).status().code(), StatusCode::kInvalidArgument);

  auto nowhere = Ledger::Open({"postgresql://pdserve:secret@127.0.0.1:1/x?connect_timeout=2"});
  EXPECT_EQ(nowhere.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(nowhere.status().message().find("secret"), std::string::npos)
      << "the password is in the message: " << nowhere.status().ToString();
  EXPECT_EQ(PostgresLedger::Redacted("postgres://u:pw@h/db?password=pw2&sslmode=require"),
            "postgres://u:***@h/db?password=***&sslmode=require");
}

TEST_F(PostgresLedgerTest, GatewaysOpeningAFreshDatabaseTogetherCreateTheSchemaOnce) {
  std::vector<std::thread> gateways;
  std::vector<Status> opened(4);
  for (int i = 0; i < 4; ++i) {
    gateways.emplace_back([&, i] {
      auto l = Ledger::Open({uri_});
      opened[i] = l.ok() ? (*l)->Append(Row("g" + std::to_string(i), "t", i)) : l.status();
    });
  }
  for (auto& g : gateways) g.join();
  for (const Status& s : opened) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(server_->Psql(Database(), "SELECT count(*) FROM pdserve_ledger").out, "1\n");
  EXPECT_EQ(OpenPg()->Rows({}).value().size(), 4u);
}

TEST_F(PostgresLedgerTest, ReportExportAndForgetCommandsReadPostgresAsTheSqliteFile) {
  const auto rows = VariedRows();
  const std::string file = dir_ / "r.sqlite";
  {
    auto pg = OpenPg(), lite = OpenOrDie(file);
    ASSERT_TRUE(pg && lite);
    ASSERT_TRUE(pg->AppendBatch(rows).ok());
    ASSERT_TRUE(lite->AppendBatch(rows).ok());
    for (Ledger* l : {pg.get(), lite.get()}) {
      ASSERT_TRUE(
          l->UpsertPeriod({"p", Worker(1, CapacityClass::kReserved, 2.0), 990, 1020, 5}).ok());
    }
  }
  for (const std::string command : {"report --format json", "ledger export --format json"}) {
    const auto from_pg =
        testing::RunShell(std::string(PDSERVE_BINARY) + " " + command + " --ledger '" + uri_ + "'");
    const auto from_file =
        testing::RunShell(std::string(PDSERVE_BINARY) + " " + command + " --ledger " + file);
    ASSERT_EQ(from_pg.exit_code, 0) << from_pg.out;
    ASSERT_EQ(from_file.exit_code, 0) << from_file.out;
    auto a = nlohmann::json::parse(from_pg.out), b = nlohmann::json::parse(from_file.out);
    EXPECT_EQ(a, b) << command;
  }
  const auto forget = testing::RunShell(std::string(PDSERVE_BINARY) +
                                        " ledger forget --tenant acme --ledger '" + uri_ + "'");
  ASSERT_EQ(forget.exit_code, 0) << forget.out;
  EXPECT_EQ(server_->Psql(Database(), "SELECT count(*) FROM attempts WHERE tenant = 'acme'").out,
            "0\n");
  EXPECT_NE(server_->Psql(Database(), "SELECT count(*) FROM attempts").out, "0\n");
}

}  // namespace
}  // namespace pdserve::ledger
