// SqliteLedger: the ledger (ledger/ledger.h) in an embedded SQLite file, the default store. Made
// by Ledger::Open and its siblings for a location that is not a PostgreSQL URI.
//
// The file is SQLite in WAL mode with synchronous=NORMAL: a batch is committed when AppendBatch
// returns, so it survives kill -9 of the gateway (not necessarily a power cut). Readers may open
// the file while the gateway writes. Schema version in `PRAGMA user_version`, the file's kind in
// `PRAGMA application_id`; a file of another kind or a newer version is refused.
//
// Schema versions: 2 stores each row's cost by part (AttemptCost: prefill and decode compute,
// egress, API tokens) beside its total, as the gateway priced it. A version 1 file is migrated
// when opened for writing: the part columns are added, empty (NULL) for its old rows. Rows read
// with no stored parts (old rows, or a version 1 file opened read-only) get them from what the
// row recorded: compute by the cost model from its step seconds and workers, egress as its
// egress_cost_usd, API tokens as the cost_usd of a class api row; their total() is its cost_usd.
// 3 adds each row's cached_prompt_tokens; a version 1 or 2 file is migrated to 3 when opened
// for writing (its old rows read 0), and read-only its rows read 0. 4 adds each row's placement
// and placement_reason, migrated the same way (old rows read ""). 5 adds admission's decision and
// its predicted queue wait and TTFT (old rows read "" and 0: not recorded).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ledger/ledger.h"

struct sqlite3;

namespace pdserve::ledger {

class SqliteLedger final : public Ledger {
 public:
  // Ledger::Open, OpenReadOnly and OpenExisting for a file path.
  static Result<std::unique_ptr<Ledger>> Open(const LedgerOptions& options);
  static Result<std::unique_ptr<Ledger>> OpenReadOnly(const std::string& path);
  static Result<std::unique_ptr<Ledger>> OpenExisting(const std::string& path);
  ~SqliteLedger() override;

  Result<AppendOutcome> AppendBatch(const std::vector<AttemptRow>& rows) override;
  Status UpsertPeriods(const std::vector<WorkerPeriod>& periods) override;
  Result<int64_t> ForgetTenant(const std::string& tenant) override;
  Result<std::vector<AttemptRow>> Rows(const LedgerFilter& filter) const override;
  Result<std::vector<WorkerPeriod>> Periods(std::optional<double> from_unix,
                                            std::optional<double> to_unix) const override;
  const std::string& path() const override { return path_; }

 private:
  SqliteLedger(sqlite3* db, std::string path, bool store_text);
  static Result<std::unique_ptr<Ledger>> OpenWith(const std::string& path, int flags,
                                                  bool store_text);
  Status CheckOrCreateSchema(int flags);  // the SQLITE_OPEN_* flags the file was opened with
  // Brings an older file to kSchemaVersion in one transaction, each version's step in turn.
  Status Migrate();
  Status Exec(const char* sql) const;
  Status InsertRows(const std::vector<AttemptRow>& rows, AppendOutcome* outcome);

  mutable std::mutex mu_;
  sqlite3* db_;  // guarded by mu_
  const std::string path_;
  const bool store_text_;
  int schema_version_ = 0;  // the file's, once checked (a read-only file may be older)
};

}  // namespace pdserve::ledger
