// PostgresLedger: the ledger (ledger/ledger.h) in a PostgreSQL database, which several gateways
// write at once and `pdserve report` reads. Made by Ledger::Open and its siblings for a
// `postgresql://` or `postgres://` location (a libpq connection URI; the usual PG* environment
// variables fill in what it leaves out).
//
// The tables are SQLite's with PostgreSQL's types (BIGINT, DOUBLE PRECISION, TEXT), in the
// connection's schema (search_path): attempts, attempt_tags and worker_periods, and one row in
// pdserve_ledger naming the schema version (5, as sqlite_ledger.h). Open creates them under a
// transaction-scoped advisory lock, so gateways starting together create them once; a database
// whose pdserve_ledger names another application or a newer version is refused. An AppendBatch is
// one transaction of one INSERT ... SELECT ... ON CONFLICT DO NOTHING (a row already there is
// left out and named) and its tags: committed, under the server's synchronous_commit, when it
// returns. The batch reaches the server by COPY into the session's temporary staging tables.
//
// A connection that drops is opened again on the next call; the call that found it dropped
// fails (Unavailable) and the caller retries (LedgerWriter does).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ledger/ledger.h"

struct pg_conn;

namespace pdserve::ledger {

class PostgresLedger final : public Ledger {
 public:
  // Ledger::Open, OpenReadOnly and OpenExisting for a PostgreSQL URI. OpenReadOnly and
  // OpenExisting want the schema there (NotFound otherwise); OpenReadOnly's session is read-only.
  static Result<std::unique_ptr<Ledger>> Open(const LedgerOptions& options);
  static Result<std::unique_ptr<Ledger>> OpenReadOnly(const std::string& uri);
  static Result<std::unique_ptr<Ledger>> OpenExisting(const std::string& uri);
  ~PostgresLedger() override;

  Result<AppendOutcome> AppendBatch(const std::vector<AttemptRow>& rows) override;
  Status UpsertPeriods(const std::vector<WorkerPeriod>& periods) override;
  Result<int64_t> ForgetTenant(const std::string& tenant) override;
  Result<std::vector<AttemptRow>> Rows(const LedgerFilter& filter) const override;
  Result<std::vector<WorkerPeriod>> Periods(std::optional<double> from_unix,
                                            std::optional<double> to_unix) const override;
  const std::string& path() const override { return shown_; }

  // The URI with its password replaced by "***", for messages and logs.
  static std::string Redacted(const std::string& uri);

 private:
  enum class Mode { kCreate, kExisting, kReadOnly };
  PostgresLedger(std::string uri, Mode mode, bool store_text);
  static Result<std::unique_ptr<Ledger>> OpenWith(const std::string& uri, Mode mode,
                                                  bool store_text);
  // Connects (again, after a drop) and checks or creates the schema. Under mu_.
  Status Connect() const;
  Status CheckOrCreateSchema() const;
  Status InsertRows(const std::vector<AttemptRow>& rows, AppendOutcome* outcome);

  const std::string uri_, shown_;
  const Mode mode_;
  const bool store_text_;
  mutable std::mutex mu_;
  mutable pg_conn* conn_ = nullptr;     // guarded by mu_; null or bad: connect before use
  mutable bool staging_ready_ = false;  // conn_'s session has its batch tables; guarded by mu_
};

}  // namespace pdserve::ledger
