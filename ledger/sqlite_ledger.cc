// The ledger's SQLite schema, writes and queries; see sqlite_ledger.h. Every statement is
// prepared and bound (no values spliced into SQL); each AppendBatch is one transaction.
#include "ledger/sqlite_ledger.h"

#include "ledger/ledger_columns.h"

#include <sqlite3.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <utility>

namespace pdserve::ledger {
namespace {

constexpr int kSchemaVersion = 5;           // see ledger.h, "Schema versions"
constexpr int kApplicationId = 0x70647376;  // "pdsv": marks the file as a pdserve ledger

constexpr char kSchema[] = R"sql(
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
  prefill_compute_usd REAL, decode_compute_usd REAL, api_tokens_usd REAL,
  cached_prompt_tokens INTEGER NOT NULL DEFAULT 0,
  placement TEXT NOT NULL DEFAULT '', placement_reason TEXT NOT NULL DEFAULT '',
  admission TEXT NOT NULL DEFAULT '', predicted_queue_seconds REAL NOT NULL DEFAULT 0,
  predicted_ttft_seconds REAL NOT NULL DEFAULT 0,
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
)sql";

// Version 2's cost parts (besides egress_cost_usd): NULL in rows written before it.
constexpr char kMigrateToVersion2[] = R"sql(
ALTER TABLE attempts ADD COLUMN prefill_compute_usd REAL;
ALTER TABLE attempts ADD COLUMN decode_compute_usd REAL;
ALTER TABLE attempts ADD COLUMN api_tokens_usd REAL;
PRAGMA user_version=2;
)sql";

// Version 3's cached prompt tokens: 0 in rows written before it (nothing was cached then).
constexpr char kMigrateToVersion3[] = R"sql(
ALTER TABLE attempts ADD COLUMN cached_prompt_tokens INTEGER NOT NULL DEFAULT 0;
PRAGMA user_version=3;
)sql";

// Version 4's placement and its reason: '' in rows written before it (not recorded then).
constexpr char kMigrateToVersion4[] = R"sql(
ALTER TABLE attempts ADD COLUMN placement TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN placement_reason TEXT NOT NULL DEFAULT '';
PRAGMA user_version=4;
)sql";

// Version 5's admission decision and predictions: '' and 0 in rows written before it.
constexpr char kMigrateToVersion5[] = R"sql(
ALTER TABLE attempts ADD COLUMN admission TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN predicted_queue_seconds REAL NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN predicted_ttft_seconds REAL NOT NULL DEFAULT 0;
PRAGMA user_version=5;
)sql";

// The read lists for older files, in place of the columns a version added.
constexpr char kNoCostPartColumns[] = "NULL, NULL, NULL";
constexpr char kNoCachedColumn[] = "0";
constexpr char kNoPlacementColumns[] = "'', ''";
constexpr char kNoAdmissionColumns[] = "'', 0, 0";

// One prepared statement; binds by position (1-based, in call order) and reads by column.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Status prepared() const { return Check(rc_, "prepare"); }
  // For the next row: clears the bindings and the last step.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    bound_ = 0;
  }
  void Bind(std::string_view v) {
    sqlite3_bind_text(stmt_, ++bound_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(double v) { sqlite3_bind_double(stmt_, ++bound_, v); }
  void Bind(int64_t v) { sqlite3_bind_int64(stmt_, ++bound_, v); }
  void Bind(int v) { Bind(static_cast<int64_t>(v)); }
  void BindNull() { sqlite3_bind_null(stmt_, ++bound_); }

  // SQLITE_ROW: true; SQLITE_DONE: false; otherwise an error.
  Result<bool> Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return Check(rc, "step");
  }
  Status Run() {
    auto r = Step();
    return r.ok() ? Status::Ok() : r.status();
  }

  std::string Text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  double Real(int col) const { return sqlite3_column_double(stmt_, col); }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  Status Check(int rc, const char* what) const {
    if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return Status::Ok();
    const std::string message = std::string("ledger ") + what + ": " + sqlite3_errmsg(db_);
    const int extended = sqlite3_extended_errcode(db_);
    if (extended == SQLITE_CONSTRAINT_UNIQUE || extended == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return {StatusCode::kAlreadyExists, message};
    }
    if (rc == SQLITE_NOTADB) return InvalidArgument(message + " (not a pdserve ledger)");
    return Unavailable(message);
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
  int bound_ = 0;
};

}  // namespace

SqliteLedger::SqliteLedger(sqlite3* db, std::string path, bool store_text)
    : db_(db), path_(std::move(path)), store_text_(store_text) {}

SqliteLedger::~SqliteLedger() { sqlite3_close_v2(db_); }

Result<std::unique_ptr<Ledger>> SqliteLedger::Open(const LedgerOptions& options) {
  if (options.path.empty()) return InvalidArgument("ledger: no path given");
  const std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent)) {
    return NotFound("ledger " + options.path + ": folder " + parent.string() + " does not exist");
  }
  return OpenWith(options.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, options.store_text);
}

Result<std::unique_ptr<Ledger>> SqliteLedger::OpenReadOnly(const std::string& path) {
  return OpenWith(path, SQLITE_OPEN_READONLY, false);
}

Result<std::unique_ptr<Ledger>> SqliteLedger::OpenExisting(const std::string& path) {
  return OpenWith(path, SQLITE_OPEN_READWRITE, false);
}

Result<std::unique_ptr<Ledger>> SqliteLedger::OpenWith(const std::string& path, int flags,
                                                       bool store_text) {
  std::error_code ec;
  if (!(flags & SQLITE_OPEN_CREATE) && !std::filesystem::is_regular_file(path, ec)) {
    return NotFound("ledger " + path + ": no such file");
  }
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message =
        "ledger " + path + ": cannot open: " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close_v2(db);
    return Unavailable(std::move(message));
  }
  sqlite3_busy_timeout(db, 5000);  // a report may read while the gateway writes
  std::unique_ptr<SqliteLedger> ledger(new SqliteLedger(db, path, store_text));
  Status s = ledger->CheckOrCreateSchema(flags);
  if (!s.ok()) return s.WithContext("ledger " + path);
  return std::unique_ptr<Ledger>(std::move(ledger));
}

Status SqliteLedger::Exec(const char* sql) const {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) == SQLITE_OK) return Status::Ok();
  std::string message = error ? error : sqlite3_errmsg(db_);
  sqlite3_free(error);
  if (sqlite3_errcode(db_) == SQLITE_NOTADB) {
    return InvalidArgument("not a pdserve ledger (not an SQLite database)");
  }
  return Unavailable(message);
}

Status SqliteLedger::CheckOrCreateSchema(int flags) {
  const bool writable = (flags & SQLITE_OPEN_READWRITE) != 0;
  std::lock_guard lock(mu_);
  int64_t app_id = 0, version = 0, objects = 0;
  {
    Statement header(db_,
                     "SELECT (SELECT application_id FROM pragma_application_id), "
                     "(SELECT user_version FROM pragma_user_version), "
                     "(SELECT count(*) FROM sqlite_master)");
    if (sqlite3_errcode(db_) == SQLITE_NOTADB) {
      return InvalidArgument("not a pdserve ledger (not an SQLite database)");
    }
    PDSERVE_RETURN_IF_ERROR(header.prepared());
    auto row = header.Step();
    if (!row.ok()) return row.status();
    app_id = header.Int(0);
    version = header.Int(1);
    objects = header.Int(2);
  }  // the statement ends its read before the schema changes
  if (app_id == 0 && objects == 0) {
    if (!(flags & SQLITE_OPEN_CREATE)) {
      return InvalidArgument("not a pdserve ledger (an empty database)");
    }
    PDSERVE_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    PDSERVE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
    Status s = Exec(kSchema);
    if (s.ok()) {
      s = Exec(("PRAGMA application_id=" + std::to_string(kApplicationId) +
                "; PRAGMA user_version=" + std::to_string(kSchemaVersion))
                   .c_str());
    }
    if (!s.ok()) {
      (void)Exec("ROLLBACK");
      return s;
    }
    PDSERVE_RETURN_IF_ERROR(Exec("COMMIT"));
    version = kSchemaVersion;
  } else if (app_id != kApplicationId) {
    return InvalidArgument("not a pdserve ledger (an SQLite database of another application)");
  } else if (version < 1 || version > kSchemaVersion) {
    return FailedPrecondition("ledger schema version " + std::to_string(version) +
                              ", this pdserve reads versions 1 to " +
                              std::to_string(kSchemaVersion) +
                              (version > kSchemaVersion ? " (written by a newer pdserve)" : ""));
  } else if (version < kSchemaVersion && writable) {
    PDSERVE_RETURN_IF_ERROR(Migrate());
    version = kSchemaVersion;
  }
  schema_version_ = static_cast<int>(version);
  if (writable) {
    PDSERVE_RETURN_IF_ERROR(Exec("PRAGMA journal_mode=WAL"));
    // NORMAL in WAL mode: a commit survives a process kill; only an OS crash may lose the last.
    PDSERVE_RETURN_IF_ERROR(Exec("PRAGMA synchronous=NORMAL"));
    // Forgotten tenants' rows are overwritten, not left in free pages.
    PDSERVE_RETURN_IF_ERROR(Exec("PRAGMA secure_delete=ON"));
    PDSERVE_RETURN_IF_ERROR(Exec("PRAGMA foreign_keys=ON"));
  }
  return Status::Ok();
}

Status SqliteLedger::Migrate() {
  PDSERVE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  int64_t version = 0;
  Status s;
  {  // another process may have migrated it since the caller looked
    Statement check(db_, "SELECT user_version FROM pragma_user_version");
    s = check.prepared();
    if (s.ok()) {
      auto row = check.Step();
      if (row.ok()) version = check.Int(0);
      s = row.status();
    }
  }
  if (s.ok() && version == 1) s = Exec(kMigrateToVersion2);
  if (s.ok() && version <= 2) s = Exec(kMigrateToVersion3);
  if (s.ok() && version <= 3) s = Exec(kMigrateToVersion4);
  if (s.ok() && version <= 4) s = Exec(kMigrateToVersion5);
  if (!s.ok()) {
    (void)Exec("ROLLBACK");
    return s.WithContext("migrating to schema version " + std::to_string(kSchemaVersion));
  }
  return Exec("COMMIT");
}

Result<AppendOutcome> SqliteLedger::AppendBatch(const std::vector<AttemptRow>& rows) {
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  AppendOutcome outcome;
  if (Status s = InsertRows(rows, &outcome); !s.ok()) {
    (void)Exec("ROLLBACK");
    return s;
  }
  PDSERVE_RETURN_IF_ERROR(Exec("COMMIT"));
  return outcome;
}

Status SqliteLedger::InsertRows(const std::vector<AttemptRow>& rows, AppendOutcome* outcome) {
  std::string placeholders = "?";
  for (int i = 1; i < columns::kAttemptCount; ++i) placeholders += ",?";
  // OR IGNORE: a row already there (the UNIQUE key) is left out; every column is bound, so no
  // other constraint can be what it ignores.
  Statement insert(db_, "INSERT OR IGNORE INTO attempts(" + columns::AllAttemptColumns() +
                            ") VALUES (" + placeholders + ")");
  Statement tag(db_, "INSERT INTO attempt_tags(row_id, key, value) VALUES (?, ?, ?)");
  PDSERVE_RETURN_IF_ERROR(insert.prepared());
  PDSERVE_RETURN_IF_ERROR(tag.prepared());
  for (const AttemptRow& r : rows) {
    const auto context = [&](const Status& s) {
      return s.WithContext("ledger " + path_ + ": row " + r.request_id + "#" +
                           std::to_string(r.attempt));
    };
    insert.Reset();
    columns::BindAttempt(insert, r, store_text_);
    if (Status s = insert.Run(); !s.ok()) return context(s);
    if (sqlite3_changes(db_) == 0) {
      outcome->duplicates.push_back(r.request_id + "#" + std::to_string(r.attempt));
      continue;
    }
    ++outcome->written;
    const int64_t row_id = sqlite3_last_insert_rowid(db_);
    for (const auto& [key, value] : r.tags) {
      tag.Reset();
      tag.Bind(row_id);
      tag.Bind(key);
      tag.Bind(value);
      if (Status s = tag.Run(); !s.ok()) return context(s);
    }
  }
  return Status::Ok();
}

Status SqliteLedger::UpsertPeriods(const std::vector<WorkerPeriod>& periods) {
  std::lock_guard lock(mu_);
  Statement upsert(db_, std::string("INSERT INTO worker_periods(") + columns::kPeriod +
                            ") VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(period_id) DO UPDATE "
                            "SET end_unix = excluded.end_unix, busy_seconds = "
                            "excluded.busy_seconds");
  PDSERVE_RETURN_IF_ERROR(upsert.prepared());
  PDSERVE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  for (const WorkerPeriod& p : periods) {
    upsert.Reset();
    upsert.Bind(p.period_id);
    columns::BindWorker(upsert, p.worker);
    upsert.Bind(p.start_unix);
    upsert.Bind(p.end_unix);
    upsert.Bind(p.busy_seconds);
    if (Status s = upsert.Run(); !s.ok()) {
      (void)Exec("ROLLBACK");
      return s.WithContext("ledger " + path_ + ": period " + p.period_id);
    }
  }
  return Exec("COMMIT");
}

Result<int64_t> SqliteLedger::ForgetTenant(const std::string& tenant) {
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Statement tags(db_,
                 "DELETE FROM attempt_tags WHERE row_id IN "
                 "(SELECT row_id FROM attempts WHERE tenant = ?)");
  Statement rows(db_, "DELETE FROM attempts WHERE tenant = ?");
  Status s = tags.prepared();
  if (s.ok()) s = rows.prepared();
  if (s.ok()) {
    tags.Bind(tenant);
    s = tags.Run();
  }
  int64_t deleted = 0;
  if (s.ok()) {
    rows.Bind(tenant);
    s = rows.Run();
    deleted = sqlite3_changes64(db_);
  }
  if (!s.ok()) {
    (void)Exec("ROLLBACK");
    return s.WithContext("ledger " + path_ + ": forget " + tenant);
  }
  PDSERVE_RETURN_IF_ERROR(Exec("COMMIT"));
  return deleted;
}

Result<std::vector<AttemptRow>> SqliteLedger::Rows(const LedgerFilter& filter) const {
  std::string sql = std::string("SELECT ") + columns::kAttemptV1 + ", " +
                    (schema_version_ >= 2 ? columns::kCostParts : kNoCostPartColumns) + ", " +
                    (schema_version_ >= 3 ? columns::kCached : kNoCachedColumn) + ", " +
                    (schema_version_ >= 4 ? columns::kPlacement : kNoPlacementColumns) + ", " +
                    (schema_version_ >= 5 ? columns::kAdmission : kNoAdmissionColumns) +
                    ", (SELECT json_group_object(key, value) FROM attempt_tags t WHERE t.row_id "
                    "= a.row_id) FROM attempts AS a WHERE 1";
  if (filter.tenant) sql += " AND a.tenant = ?";
  if (filter.from_unix) sql += " AND a.end_unix >= ?";
  if (filter.to_unix) sql += " AND a.end_unix < ?";
  for (size_t i = 0; i < filter.tags.size(); ++i) {
    sql +=
        " AND EXISTS (SELECT 1 FROM attempt_tags t WHERE t.row_id = a.row_id AND t.key = ? "
        "AND t.value = ?)";
  }
  sql += " ORDER BY a.end_unix, a.request_id, a.attempt";

  std::lock_guard lock(mu_);
  Statement select(db_, sql);
  PDSERVE_RETURN_IF_ERROR(select.prepared().WithContext("ledger " + path_));
  if (filter.tenant) select.Bind(*filter.tenant);
  if (filter.from_unix) select.Bind(*filter.from_unix);
  if (filter.to_unix) select.Bind(*filter.to_unix);
  for (const auto& [key, value] : filter.tags) {
    select.Bind(key);
    select.Bind(value);
  }
  std::vector<AttemptRow> rows;
  while (true) {
    auto more = select.Step();
    if (!more.ok()) return more.status().WithContext("ledger " + path_);
    if (!*more) break;
    auto r = columns::ReadAttempt(select);
    if (!r.ok()) return r.status().WithContext("ledger " + path_);
    rows.push_back(std::move(r).value());
  }
  return rows;
}

Result<std::vector<WorkerPeriod>> SqliteLedger::Periods(std::optional<double> from_unix,
                                                        std::optional<double> to_unix) const {
  std::string sql = std::string("SELECT ") + columns::kPeriod + " FROM worker_periods WHERE 1";
  if (from_unix) sql += " AND end_unix > ?";
  if (to_unix) sql += " AND start_unix < ?";
  sql += " ORDER BY start_unix, period_id";
  std::lock_guard lock(mu_);
  Statement select(db_, sql);
  PDSERVE_RETURN_IF_ERROR(select.prepared().WithContext("ledger " + path_));
  if (from_unix) select.Bind(*from_unix);
  if (to_unix) select.Bind(*to_unix);
  std::vector<WorkerPeriod> periods;
  while (true) {
    auto more = select.Step();
    if (!more.ok()) return more.status().WithContext("ledger " + path_);
    if (!*more) break;
    auto p = columns::ReadPeriod(select);
    if (!p.ok()) return p.status().WithContext("ledger " + path_);
    periods.push_back(std::move(p).value());
  }
  return periods;
}

}  // namespace pdserve::ledger
