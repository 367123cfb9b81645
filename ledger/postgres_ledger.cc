// The ledger's PostgreSQL schema, writes and queries; see postgres_ledger.h. Every value goes as
// a parameter (none spliced into SQL), in text form: doubles in their shortest exact form, read
// back exactly (PostgreSQL 12 and later print doubles that way).
#include "ledger/postgres_ledger.h"

#include <libpq-fe.h>

#include <charconv>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "ledger/ledger_columns.h"
#include "ledger/postgres_support.h"

namespace pdserve::ledger {
namespace {

using pg::FormatDouble;
using pg::Params;
using pg::ResultPtr;
using pg::ResultRow;
using pg::Run;

constexpr int kSchemaVersion = 5;  // as the SQLite file's (sqlite_ledger.h)
constexpr char kApplication[] = "pdserve-ledger";
// Taken for the transaction that checks or creates the schema: "pdsv", as SQLite's
// application_id.
constexpr char kSchemaLock[] = "SELECT pg_advisory_xact_lock(1885631350)";

constexpr char kSchema[] = R"sql(
CREATE TABLE pdserve_ledger(application TEXT NOT NULL, schema_version INTEGER NOT NULL);
CREATE TABLE attempts(
  row_id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  request_id TEXT NOT NULL, attempt INTEGER NOT NULL,
  tenant TEXT NOT NULL, model TEXT NOT NULL, endpoint TEXT NOT NULL,
  status TEXT NOT NULL, finish_reason TEXT NOT NULL,
  arrival_unix DOUBLE PRECISION NOT NULL, first_token_unix DOUBLE PRECISION NOT NULL,
  end_unix DOUBLE PRECISION NOT NULL,
  queue_seconds DOUBLE PRECISION NOT NULL, prefill_seconds DOUBLE PRECISION NOT NULL,
  transfer_seconds DOUBLE PRECISION NOT NULL, decode_seconds DOUBLE PRECISION NOT NULL,
  prompt_tokens BIGINT NOT NULL, completion_tokens BIGINT NOT NULL,
  prefill_worker_id BIGINT NOT NULL, prefill_worker_name TEXT NOT NULL,
  prefill_worker_role TEXT NOT NULL, prefill_capacity_class TEXT NOT NULL,
  prefill_zone TEXT NOT NULL, prefill_price_per_gpu_hour DOUBLE PRECISION NOT NULL,
  prefill_gpu_count INTEGER NOT NULL,
  decode_worker_id BIGINT NOT NULL, decode_worker_name TEXT NOT NULL,
  decode_worker_role TEXT NOT NULL, decode_capacity_class TEXT NOT NULL,
  decode_zone TEXT NOT NULL, decode_price_per_gpu_hour DOUBLE PRECISION NOT NULL,
  decode_gpu_count INTEGER NOT NULL,
  prefill_step_seconds DOUBLE PRECISION NOT NULL, decode_step_seconds DOUBLE PRECISION NOT NULL,
  kv_bytes BIGINT NOT NULL, egress_cost_usd DOUBLE PRECISION NOT NULL,
  cost_usd DOUBLE PRECISION NOT NULL,
  "user" TEXT NOT NULL, prompt_text TEXT, completion_text TEXT,
  prefill_compute_usd DOUBLE PRECISION, decode_compute_usd DOUBLE PRECISION,
  api_tokens_usd DOUBLE PRECISION,
  cached_prompt_tokens BIGINT NOT NULL DEFAULT 0,
  placement TEXT NOT NULL DEFAULT '', placement_reason TEXT NOT NULL DEFAULT '',
  admission TEXT NOT NULL DEFAULT '',
  predicted_queue_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
  predicted_ttft_seconds DOUBLE PRECISION NOT NULL DEFAULT 0,
  UNIQUE(request_id, attempt));
CREATE INDEX attempts_end ON attempts(end_unix);
CREATE INDEX attempts_tenant_end ON attempts(tenant, end_unix);
CREATE TABLE attempt_tags(
  row_id BIGINT NOT NULL REFERENCES attempts(row_id) ON DELETE CASCADE,
  key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(row_id, key));
CREATE INDEX attempt_tags_key_value ON attempt_tags(key, value);
CREATE TABLE worker_periods(
  period_id TEXT PRIMARY KEY,
  worker_id BIGINT NOT NULL, worker_name TEXT NOT NULL, worker_role TEXT NOT NULL,
  capacity_class TEXT NOT NULL, zone TEXT NOT NULL, price_per_gpu_hour DOUBLE PRECISION NOT NULL,
  gpu_count INTEGER NOT NULL,
  start_unix DOUBLE PRECISION NOT NULL, end_unix DOUBLE PRECISION NOT NULL,
  busy_seconds DOUBLE PRECISION NOT NULL);
)sql";

// Rows in COPY's text format (see ledger_columns.h's Binder): tab between fields, a newline
// after each row, \N for NULL, and backslash, tab, newline and carriage return escaped.
class CopyText {
 public:
  void Bind(std::string_view v) {
    Separate();
    for (char c : v) {
      switch (c) {
        case '\\':
          text_ += "\\\\";
          break;
        case '\t':
          text_ += "\\t";
          break;
        case '\n':
          text_ += "\\n";
          break;
        case '\r':
          text_ += "\\r";
          break;
        default:
          text_ += c;
      }
    }
  }
  void Bind(int64_t v) {
    Separate();
    text_ += std::to_string(v);
  }
  void Bind(double v) {
    Separate();
    text_ += FormatDouble(v);
  }
  void BindNull() {
    Separate();
    text_ += "\\N";
  }
  void EndRow() {
    text_ += '\n';
    first_ = true;
  }
  const std::string& text() const { return text_; }

 private:
  void Separate() {
    if (!first_) text_ += '\t';
    first_ = false;
  }
  std::string text_;
  bool first_ = true;
};

}  // namespace

std::string PostgresLedger::Redacted(const std::string& uri) { return pg::RedactPassword(uri); }

PostgresLedger::PostgresLedger(std::string uri, Mode mode, bool store_text)
    : uri_(std::move(uri)),
      shown_(pg::RedactPassword(uri_)),
      mode_(mode),
      store_text_(store_text) {}

PostgresLedger::~PostgresLedger() {
  if (conn_) PQfinish(conn_);
}

Result<std::unique_ptr<Ledger>> PostgresLedger::Open(const LedgerOptions& options) {
  return OpenWith(options.path, Mode::kCreate, options.store_text);
}

Result<std::unique_ptr<Ledger>> PostgresLedger::OpenReadOnly(const std::string& uri) {
  return OpenWith(uri, Mode::kReadOnly, false);
}

Result<std::unique_ptr<Ledger>> PostgresLedger::OpenExisting(const std::string& uri) {
  return OpenWith(uri, Mode::kExisting, false);
}

Result<std::unique_ptr<Ledger>> PostgresLedger::OpenWith(const std::string& uri, Mode mode,
                                                         bool store_text) {
  std::unique_ptr<PostgresLedger> ledger(new PostgresLedger(uri, mode, store_text));
  std::lock_guard lock(ledger->mu_);
  PDSERVE_RETURN_IF_ERROR(ledger->Connect());
  return std::unique_ptr<Ledger>(std::move(ledger));
}

namespace {

// COPY ... FROM STDIN of `text` (COPY's text format).
Status Copy(pg_conn* conn, const std::string& shown, const std::string& sql,
            const std::string& text) {
  ResultPtr start(PQexec(conn, sql.c_str()), &PQclear);
  if (!start || PQresultStatus(start.get()) != PGRES_COPY_IN) {
    return Unavailable("ledger " + shown + ": " + sql + ": " + PQerrorMessage(conn));
  }
  constexpr size_t kChunk = 1 << 20;
  for (size_t at = 0; at < text.size(); at += kChunk) {
    const size_t n = std::min(kChunk, text.size() - at);
    if (PQputCopyData(conn, text.data() + at, static_cast<int>(n)) != 1) {
      return Unavailable("ledger " + shown + ": sending a batch: " + PQerrorMessage(conn));
    }
  }
  if (PQputCopyEnd(conn, nullptr) != 1) {
    return Unavailable("ledger " + shown + ": ending a batch: " + PQerrorMessage(conn));
  }
  Status s;
  while (PGresult* r = PQgetResult(conn)) {
    ResultPtr result(r, &PQclear);
    if (PQresultStatus(r) != PGRES_COMMAND_OK && s.ok()) {
      s = Unavailable("ledger " + shown + ": a batch: " + PQerrorMessage(conn));
    }
  }
  return s;
}

}  // namespace

Status PostgresLedger::Connect() const {
  if (conn_ && PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
  staging_ready_ = false;  // a new session: its temporary tables are to be made
  PDSERVE_RETURN_IF_ERROR(pg::Reconnect(uri_, "ledger " + shown_, &conn_));
  if (mode_ == Mode::kReadOnly) {
    PDSERVE_RETURN_IF_ERROR(
        Run(conn_, "ledger " + shown_, "SET default_transaction_read_only = on").status());
  }
  return CheckOrCreateSchema();
}

Status PostgresLedger::CheckOrCreateSchema() const {
  PDSERVE_RETURN_IF_ERROR(Run(conn_, "ledger " + shown_, "BEGIN").status());
  Status s = [&]() -> Status {
    if (mode_ == Mode::kCreate)
      PDSERVE_RETURN_IF_ERROR(Run(conn_, "ledger " + shown_, kSchemaLock).status());
    PDSERVE_ASSIGN_OR_RETURN(ResultPtr there, Run(conn_, "ledger " + shown_,
                                                  "SELECT to_regclass('pdserve_ledger') IS NULL"));
    if (ResultRow(there.get(), 0).Text(0) == "t") {
      if (mode_ != Mode::kCreate) {
        return NotFound("ledger " + shown_ + ": no pdserve ledger in this database");
      }
      ResultPtr created(PQexec(conn_, kSchema), &PQclear);  // several statements: no params
      if (!created || PQresultStatus(created.get()) != PGRES_COMMAND_OK) {
        return Unavailable("ledger " + shown_ + ": creating the schema: " + PQerrorMessage(conn_));
      }
      Params p;
      p.Bind(std::string_view(kApplication));
      p.Bind(static_cast<int64_t>(kSchemaVersion));
      return Run(conn_, "ledger " + shown_, "INSERT INTO pdserve_ledger VALUES ($1, $2)", p)
          .status();
    }
    PDSERVE_ASSIGN_OR_RETURN(
        ResultPtr header,
        Run(conn_, "ledger " + shown_, "SELECT application, schema_version FROM pdserve_ledger"));
    if (PQntuples(header.get()) != 1 ||
        ResultRow(header.get(), 0).Text(0) != std::string_view(kApplication)) {
      return InvalidArgument("ledger " + shown_ +
                             ": not a pdserve ledger (its pdserve_ledger table names another "
                             "application)");
    }
    const int64_t version = ResultRow(header.get(), 0).Int(1);
    if (version != kSchemaVersion) {
      return FailedPrecondition("ledger " + shown_ + ": schema version " + std::to_string(version) +
                                ", this pdserve reads version " + std::to_string(kSchemaVersion) +
                                (version > kSchemaVersion ? " (written by a newer pdserve)" : ""));
    }
    return Status::Ok();
  }();
  if (!s.ok()) {
    (void)Run(conn_, "ledger " + shown_, "ROLLBACK");
    return s;
  }
  return Run(conn_, "ledger " + shown_, "COMMIT").status();
}

Result<AppendOutcome> PostgresLedger::AppendBatch(const std::vector<AttemptRow>& rows) {
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Connect());
  PDSERVE_RETURN_IF_ERROR(Run(conn_, "ledger " + shown_, "BEGIN").status());
  AppendOutcome outcome;
  if (Status s = InsertRows(rows, &outcome); !s.ok()) {
    (void)Run(conn_, "ledger " + shown_, "ROLLBACK");
    staging_ready_ = false;  // made in the transaction rolled back, perhaps
    return s;
  }
  PDSERVE_RETURN_IF_ERROR(Run(conn_, "ledger " + shown_, "COMMIT").status());
  return outcome;
}

Status PostgresLedger::InsertRows(const std::vector<AttemptRow>& rows, AppendOutcome* outcome) {
  // The batch goes by COPY into this session's staging tables (emptied at each commit), then one
  // statement moves what is new into attempts, and its tags, naming the rows it inserted.
  if (!staging_ready_) {
    PDSERVE_RETURN_IF_ERROR(
        Run(conn_, "ledger " + shown_,
            "CREATE TEMP TABLE IF NOT EXISTS pdserve_batch ON COMMIT DELETE ROWS AS SELECT " +
                columns::AllAttemptColumns() + " FROM attempts WITH NO DATA")
            .status());
    PDSERVE_RETURN_IF_ERROR(
        Run(conn_, "ledger " + shown_,
            "CREATE TEMP TABLE IF NOT EXISTS pdserve_batch_tags(request_id "
            "TEXT, attempt INTEGER, key TEXT, value TEXT) ON COMMIT DELETE ROWS")
            .status());
    staging_ready_ = true;
  }
  // A key twice in the batch: the first is written, the others are duplicates (as SQLite).
  std::set<std::pair<std::string_view, int>> seen;
  std::vector<const AttemptRow*> fresh;
  std::vector<bool> first(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    first[i] = seen.insert({rows[i].request_id, rows[i].attempt}).second;
    if (first[i]) fresh.push_back(&rows[i]);
  }
  CopyText copy;
  CopyText tags;
  for (const AttemptRow* r : fresh) {
    columns::BindAttempt(copy, *r, store_text_);
    copy.EndRow();
    for (const auto& [key, value] : r->tags) {
      tags.Bind(std::string_view(r->request_id));
      tags.Bind(static_cast<int64_t>(r->attempt));
      tags.Bind(std::string_view(key));
      tags.Bind(std::string_view(value));
      tags.EndRow();
    }
  }
  PDSERVE_RETURN_IF_ERROR(
      Copy(conn_, shown_, "COPY pdserve_batch(" + columns::AllAttemptColumns() + ") FROM STDIN",
           copy.text()));
  if (!tags.text().empty()) {
    PDSERVE_RETURN_IF_ERROR(Copy(conn_, shown_, "COPY pdserve_batch_tags FROM STDIN", tags.text()));
  }
  PDSERVE_ASSIGN_OR_RETURN(
      ResultPtr result,
      Run(conn_, "ledger " + shown_,
          "WITH inserted AS (INSERT INTO attempts(" + columns::AllAttemptColumns() + ") SELECT " +
              columns::AllAttemptColumns() +
              " FROM pdserve_batch ON CONFLICT (request_id, attempt) DO NOTHING RETURNING row_id, "
              "request_id, attempt), tagged AS (INSERT INTO attempt_tags(row_id, key, value) "
              "SELECT i.row_id, t.key, t.value FROM inserted i JOIN pdserve_batch_tags t ON "
              "t.request_id = i.request_id AND t.attempt = i.attempt) SELECT request_id, attempt "
              "FROM inserted"));
  std::set<std::pair<std::string, int>> inserted;
  for (int i = 0; i < PQntuples(result.get()); ++i) {
    const ResultRow row(result.get(), i);
    inserted.insert({row.Text(0), static_cast<int>(row.Int(1))});
  }
  for (size_t i = 0; i < rows.size(); ++i) {  // in the batch's order
    if (first[i] && inserted.count({rows[i].request_id, rows[i].attempt})) {
      ++outcome->written;
    } else {
      outcome->duplicates.push_back(rows[i].request_id + "#" + std::to_string(rows[i].attempt));
    }
  }
  return Status::Ok();
}

Status PostgresLedger::UpsertPeriods(const std::vector<WorkerPeriod>& periods) {
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Connect());
  const std::string sql = std::string("INSERT INTO worker_periods(") + columns::kPeriod +
                          ") VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) ON CONFLICT(period_id) "
                          "DO UPDATE SET end_unix = excluded.end_unix, busy_seconds = "
                          "excluded.busy_seconds";
  PDSERVE_RETURN_IF_ERROR(Run(conn_, "ledger " + shown_, "BEGIN").status());
  for (const WorkerPeriod& p : periods) {
    Params params;
    params.Bind(std::string_view(p.period_id));
    columns::BindWorker(params, p.worker);
    params.Bind(p.start_unix);
    params.Bind(p.end_unix);
    params.Bind(p.busy_seconds);
    if (Status s = Run(conn_, "ledger " + shown_, sql, params).status(); !s.ok()) {
      (void)Run(conn_, "ledger " + shown_, "ROLLBACK");
      return s.WithContext("period " + p.period_id);
    }
  }
  return Run(conn_, "ledger " + shown_, "COMMIT").status();
}

Result<int64_t> PostgresLedger::ForgetTenant(const std::string& tenant) {
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Connect());
  Params params;
  params.Bind(std::string_view(tenant));
  // Its tags go with them (ON DELETE CASCADE), in the one statement's transaction.
  PDSERVE_ASSIGN_OR_RETURN(ResultPtr result, Run(conn_, "ledger " + shown_,
                                                 "DELETE FROM attempts WHERE tenant = $1", params));
  int64_t deleted = 0;
  const char* count = PQcmdTuples(result.get());
  std::from_chars(count, count + std::char_traits<char>::length(count), deleted);
  return deleted;
}

Result<std::vector<AttemptRow>> PostgresLedger::Rows(const LedgerFilter& filter) const {
  Params params;
  std::string sql = "SELECT " + columns::AllAttemptColumns() +
                    ", (SELECT json_object_agg(key, value) FROM attempt_tags t WHERE t.row_id = "
                    "a.row_id) FROM attempts AS a WHERE TRUE";
  if (filter.tenant) {
    sql += " AND a.tenant = " + params.Next();
    params.Bind(std::string_view(*filter.tenant));
  }
  if (filter.from_unix) {
    sql += " AND a.end_unix >= " + params.Next() + "::double precision";
    params.Bind(*filter.from_unix);
  }
  if (filter.to_unix) {
    sql += " AND a.end_unix < " + params.Next() + "::double precision";
    params.Bind(*filter.to_unix);
  }
  for (const auto& [key, value] : filter.tags) {
    sql += " AND EXISTS (SELECT 1 FROM attempt_tags t WHERE t.row_id = a.row_id AND t.key = " +
           params.Next();
    params.Bind(std::string_view(key));
    sql += " AND t.value = " + params.Next() + ")";
    params.Bind(std::string_view(value));
  }
  // Byte order, as SQLite's, whatever the database's collation.
  sql += " ORDER BY a.end_unix, a.request_id COLLATE \"C\", a.attempt";
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Connect());
  PDSERVE_ASSIGN_OR_RETURN(ResultPtr result, Run(conn_, "ledger " + shown_, sql, params));
  std::vector<AttemptRow> rows;
  rows.reserve(PQntuples(result.get()));
  for (int i = 0; i < PQntuples(result.get()); ++i) {
    auto row = columns::ReadAttempt(ResultRow(result.get(), i));
    if (!row.ok()) return row.status().WithContext("ledger " + shown_);
    rows.push_back(std::move(row).value());
  }
  return rows;
}

Result<std::vector<WorkerPeriod>> PostgresLedger::Periods(std::optional<double> from_unix,
                                                          std::optional<double> to_unix) const {
  Params params;
  std::string sql = std::string("SELECT ") + columns::kPeriod + " FROM worker_periods WHERE TRUE";
  if (from_unix) {
    sql += " AND end_unix > " + params.Next() + "::double precision";
    params.Bind(*from_unix);
  }
  if (to_unix) {
    sql += " AND start_unix < " + params.Next() + "::double precision";
    params.Bind(*to_unix);
  }
  sql += " ORDER BY start_unix, period_id COLLATE \"C\"";
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Connect());
  PDSERVE_ASSIGN_OR_RETURN(ResultPtr result, Run(conn_, "ledger " + shown_, sql, params));
  std::vector<WorkerPeriod> periods;
  for (int i = 0; i < PQntuples(result.get()); ++i) {
    auto period = columns::ReadPeriod(ResultRow(result.get(), i));
    if (!period.ok()) return period.status().WithContext("ledger " + shown_);
    periods.push_back(std::move(period).value());
  }
  return periods;
}

}  // namespace pdserve::ledger
