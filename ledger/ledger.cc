// The ledger's SQLite schema, writes and queries; see ledger.h. Every statement is prepared and
// bound (no values spliced into SQL); each Append is one transaction.
#include "ledger/ledger.h"

#include <sqlite3.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
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

// The attempt columns in the order Append binds them and Rows reads them.
constexpr char kAttemptColumns[] =
    "request_id, attempt, tenant, model, endpoint, status, finish_reason, arrival_unix, "
    "first_token_unix, end_unix, queue_seconds, prefill_seconds, transfer_seconds, "
    "decode_seconds, prompt_tokens, completion_tokens, prefill_worker_id, prefill_worker_name, "
    "prefill_worker_role, prefill_capacity_class, prefill_zone, prefill_price_per_gpu_hour, "
    "prefill_gpu_count, decode_worker_id, decode_worker_name, decode_worker_role, "
    "decode_capacity_class, decode_zone, decode_price_per_gpu_hour, decode_gpu_count, "
    "prefill_step_seconds, decode_step_seconds, kv_bytes, egress_cost_usd, cost_usd, user, "
    "prompt_text, completion_text";
// Version 2's cost parts, after those; a version 1 file has none (Rows reads NULLs instead).
constexpr char kCostPartColumns[] = "prefill_compute_usd, decode_compute_usd, api_tokens_usd";
constexpr char kNoCostPartColumns[] = "NULL, NULL, NULL";
// Version 3's cached prompt tokens, last; older files read 0.
constexpr char kCachedColumn[] = "cached_prompt_tokens";
constexpr char kNoCachedColumn[] = "0";
// Version 4's placement, last; older files read ''.
constexpr char kPlacementColumns[] = "placement, placement_reason";
constexpr char kNoPlacementColumns[] = "'', ''";
// Version 5's admission decision and predictions, last; older files read '' and 0.
constexpr char kAdmissionColumns[] = "admission, predicted_queue_seconds, predicted_ttft_seconds";
constexpr char kNoAdmissionColumns[] = "'', 0, 0";
constexpr int kAttemptColumnCount = 47;  // the five lists

constexpr char kPeriodColumns[] =
    "period_id, worker_id, worker_name, worker_role, capacity_class, zone, price_per_gpu_hour, "
    "gpu_count, start_unix, end_unix, busy_seconds";

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
  void Bind(std::string_view v) {
    sqlite3_bind_text(stmt_, ++bound_, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(double v) { sqlite3_bind_double(stmt_, ++bound_, v); }
  void Bind(int64_t v) { sqlite3_bind_int64(stmt_, ++bound_, v); }
  void Bind(int v) { Bind(static_cast<int64_t>(v)); }
  void BindNullableText(const std::string* v) {
    if (v) {
      Bind(*v);
    } else {
      sqlite3_bind_null(stmt_, ++bound_);
    }
  }
  void Bind(const WorkerRef& w) {
    Bind(static_cast<int64_t>(w.id));
    Bind(w.name);
    Bind(w.role);
    Bind(ToString(w.capacity_class));
    Bind(w.zone);
    Bind(w.price_per_gpu_hour);
    Bind(w.gpu_count);
  }

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
  std::optional<double> NullableReal(int col) const {
    if (sqlite3_column_type(stmt_, col) == SQLITE_NULL) return std::nullopt;
    return Real(col);
  }
  Result<WorkerRef> Worker(int col) const {
    WorkerRef w;
    w.id = static_cast<uint64_t>(Int(col));
    w.name = Text(col + 1);
    w.role = Text(col + 2);
    PDSERVE_ASSIGN_OR_RETURN(w.capacity_class, ParseCapacityClass(Text(col + 3)));
    w.zone = Text(col + 4);
    w.price_per_gpu_hour = Real(col + 5);
    w.gpu_count = static_cast<int>(Int(col + 6));
    return w;
  }

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

// The parts of a row written before version 2 (see ledger.h, "Schema versions").
AttemptCost CostOfUnsplitRow(const AttemptRow& row, double egress_cost_usd, double cost_usd) {
  AttemptCost c = PriceAttempt(row, {});
  c.egress_usd = egress_cost_usd;
  if (row.decode_worker.capacity_class == CapacityClass::kApi) c.api_tokens_usd = cost_usd;
  return c;
}

}  // namespace

Ledger::Ledger(sqlite3* db, std::string path, bool store_text)
    : db_(db), path_(std::move(path)), store_text_(store_text) {}

Ledger::~Ledger() { sqlite3_close_v2(db_); }

Result<std::unique_ptr<Ledger>> Ledger::Open(const LedgerOptions& options) {
  if (options.path.empty()) return InvalidArgument("ledger: no path given");
  const std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent)) {
    return NotFound("ledger " + options.path + ": folder " + parent.string() + " does not exist");
  }
  return OpenWith(options.path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, options.store_text);
}

Result<std::unique_ptr<Ledger>> Ledger::OpenReadOnly(const std::string& path) {
  return OpenWith(path, SQLITE_OPEN_READONLY, false);
}

Result<std::unique_ptr<Ledger>> Ledger::OpenExisting(const std::string& path) {
  return OpenWith(path, SQLITE_OPEN_READWRITE, false);
}

Result<std::unique_ptr<Ledger>> Ledger::OpenWith(const std::string& path, int flags,
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
  std::unique_ptr<Ledger> ledger(new Ledger(db, path, store_text));
  Status s = ledger->CheckOrCreateSchema(flags);
  if (!s.ok()) return s.WithContext("ledger " + path);
  return ledger;
}

Status Ledger::Exec(const char* sql) const {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) == SQLITE_OK) return Status::Ok();
  std::string message = error ? error : sqlite3_errmsg(db_);
  sqlite3_free(error);
  if (sqlite3_errcode(db_) == SQLITE_NOTADB) {
    return InvalidArgument("not a pdserve ledger (not an SQLite database)");
  }
  return Unavailable(message);
}

Status Ledger::CheckOrCreateSchema(int flags) {
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

Status Ledger::Migrate() {
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

Status Ledger::Append(const AttemptRow& r) {
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Exec("BEGIN IMMEDIATE"));
  Status s = [&]() -> Status {
    std::string placeholders = "?";
    for (int i = 1; i < kAttemptColumnCount; ++i) placeholders += ",?";
    Statement insert(db_, std::string("INSERT INTO attempts(") + kAttemptColumns + ", " +
                              kCostPartColumns + ", " + kCachedColumn + ", " + kPlacementColumns +
                              ", " + kAdmissionColumns + ") VALUES (" + placeholders + ")");
    PDSERVE_RETURN_IF_ERROR(insert.prepared());
    insert.Bind(r.request_id);
    insert.Bind(r.attempt);
    for (const std::string* v : {&r.tenant, &r.model, &r.endpoint}) insert.Bind(*v);
    insert.Bind(ToString(r.status));
    insert.Bind(r.finish_reason);
    for (double v : {r.arrival_unix, r.first_token_unix, r.end_unix, r.queue_seconds,
                     r.prefill_seconds, r.transfer_seconds, r.decode_seconds}) {
      insert.Bind(v);
    }
    insert.Bind(r.prompt_tokens);
    insert.Bind(r.completion_tokens);
    insert.Bind(r.prefill_worker);
    insert.Bind(r.decode_worker);
    insert.Bind(r.prefill_step_seconds);
    insert.Bind(r.decode_step_seconds);
    insert.Bind(r.kv_bytes);
    insert.Bind(r.cost.egress_usd);
    insert.Bind(r.cost.total());
    insert.Bind(r.user);
    insert.BindNullableText(store_text_ ? &r.prompt_text : nullptr);
    insert.BindNullableText(store_text_ ? &r.completion_text : nullptr);
    insert.Bind(r.cost.prefill_compute_usd);
    insert.Bind(r.cost.decode_compute_usd);
    insert.Bind(r.cost.api_tokens_usd);
    insert.Bind(r.cached_prompt_tokens);
    insert.Bind(r.placement);
    insert.Bind(r.placement_reason);
    insert.Bind(r.admission);
    insert.Bind(r.predicted_queue_seconds);
    insert.Bind(r.predicted_ttft_seconds);
    PDSERVE_RETURN_IF_ERROR(insert.Run());
    const int64_t row_id = sqlite3_last_insert_rowid(db_);
    for (const auto& [key, value] : r.tags) {
      Statement tag(db_, "INSERT INTO attempt_tags(row_id, key, value) VALUES (?, ?, ?)");
      PDSERVE_RETURN_IF_ERROR(tag.prepared());
      tag.Bind(row_id);
      tag.Bind(key);
      tag.Bind(value);
      PDSERVE_RETURN_IF_ERROR(tag.Run());
    }
    return Status::Ok();
  }();
  if (!s.ok()) {
    (void)Exec("ROLLBACK");
    return s.WithContext("ledger " + path_ + ": row " + r.request_id + "#" +
                         std::to_string(r.attempt));
  }
  return Exec("COMMIT");
}

Status Ledger::UpsertPeriod(const WorkerPeriod& p) {
  std::lock_guard lock(mu_);
  Statement upsert(db_, std::string("INSERT INTO worker_periods(") + kPeriodColumns +
                            ") VALUES (?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(period_id) DO UPDATE "
                            "SET end_unix = excluded.end_unix, busy_seconds = "
                            "excluded.busy_seconds");
  PDSERVE_RETURN_IF_ERROR(upsert.prepared());
  upsert.Bind(p.period_id);
  upsert.Bind(p.worker);
  upsert.Bind(p.start_unix);
  upsert.Bind(p.end_unix);
  upsert.Bind(p.busy_seconds);
  Status s = upsert.Run();
  return s.ok() ? s : s.WithContext("ledger " + path_ + ": period " + p.period_id);
}

Result<int64_t> Ledger::ForgetTenant(const std::string& tenant) {
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

Result<std::vector<AttemptRow>> Ledger::Rows(const LedgerFilter& filter) const {
  auto row_error = [&](const AttemptRow& r, const Status& s) {
    return s.WithContext("ledger " + path_ + ": row " + r.request_id + "#" +
                         std::to_string(r.attempt));
  };
  std::string sql = std::string("SELECT ") + kAttemptColumns + ", " +
                    (schema_version_ >= 2 ? kCostPartColumns : kNoCostPartColumns) + ", " +
                    (schema_version_ >= 3 ? kCachedColumn : kNoCachedColumn) + ", " +
                    (schema_version_ >= 4 ? kPlacementColumns : kNoPlacementColumns) + ", " +
                    (schema_version_ >= 5 ? kAdmissionColumns : kNoAdmissionColumns) +
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
    AttemptRow r;
    int c = 0;
    r.request_id = select.Text(c++);
    r.attempt = static_cast<int>(select.Int(c++));
    for (std::string* v : {&r.tenant, &r.model, &r.endpoint}) *v = select.Text(c++);
    auto status = ParseAttemptStatus(select.Text(c++));
    if (!status.ok()) return row_error(r, status.status());
    r.status = *status;
    r.finish_reason = select.Text(c++);
    for (double* v : {&r.arrival_unix, &r.first_token_unix, &r.end_unix, &r.queue_seconds,
                      &r.prefill_seconds, &r.transfer_seconds, &r.decode_seconds}) {
      *v = select.Real(c++);
    }
    r.prompt_tokens = select.Int(c++);
    r.completion_tokens = select.Int(c++);
    for (WorkerRef* w : {&r.prefill_worker, &r.decode_worker}) {
      auto worker = select.Worker(c);
      if (!worker.ok()) return row_error(r, worker.status());
      *w = std::move(worker).value();
      c += 7;
    }
    r.prefill_step_seconds = select.Real(c++);
    r.decode_step_seconds = select.Real(c++);
    r.kv_bytes = select.Int(c++);
    const double egress_cost_usd = select.Real(c++), cost_usd = select.Real(c++);
    r.user = select.Text(c++);
    r.prompt_text = select.Text(c++);
    r.completion_text = select.Text(c++);
    if (const std::optional<double> prefill = select.NullableReal(c)) {
      r.cost = {*prefill, select.Real(c + 1), egress_cost_usd, select.Real(c + 2)};
    } else {
      r.cost = CostOfUnsplitRow(r, egress_cost_usd, cost_usd);
    }
    c += 3;
    r.cached_prompt_tokens = select.Int(c++);
    r.placement = select.Text(c++);
    r.placement_reason = select.Text(c++);
    r.admission = select.Text(c++);
    r.predicted_queue_seconds = select.Real(c++);
    r.predicted_ttft_seconds = select.Real(c++);
    const std::string tags = select.Text(c++);
    if (!tags.empty()) {
      auto j = nlohmann::json::parse(tags, nullptr, /*allow_exceptions=*/false);
      if (j.is_object()) {
        for (const auto& [key, value] : j.items()) {
          if (value.is_string()) r.tags[key] = value.get<std::string>();
        }
      }
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

Result<std::vector<WorkerPeriod>> Ledger::Periods(std::optional<double> from_unix,
                                                  std::optional<double> to_unix) const {
  std::string sql = std::string("SELECT ") + kPeriodColumns + " FROM worker_periods WHERE 1";
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
    WorkerPeriod p;
    p.period_id = select.Text(0);
    auto worker = select.Worker(1);
    if (!worker.ok()) {
      return worker.status().WithContext("ledger " + path_ + ": period " + p.period_id);
    }
    p.worker = std::move(worker).value();
    p.start_unix = select.Real(8);
    p.end_unix = select.Real(9);
    p.busy_seconds = select.Real(10);
    periods.push_back(std::move(p));
  }
  return periods;
}

}  // namespace pdserve::ledger
