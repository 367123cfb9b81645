// The ledger's choice of store by location, and what every store shares; see ledger.h.
#include "ledger/ledger.h"

#include "ledger/postgres_ledger.h"
#include "ledger/sqlite_ledger.h"

namespace pdserve::ledger {

bool IsPostgresLocation(std::string_view location) {
  return location.starts_with("postgresql://") || location.starts_with("postgres://");
}

Result<std::unique_ptr<Ledger>> Ledger::Open(const LedgerOptions& options) {
  if (IsPostgresLocation(options.path)) return PostgresLedger::Open(options);
  return SqliteLedger::Open(options);
}

Result<std::unique_ptr<Ledger>> Ledger::OpenReadOnly(const std::string& location) {
  if (IsPostgresLocation(location)) return PostgresLedger::OpenReadOnly(location);
  return SqliteLedger::OpenReadOnly(location);
}

Result<std::unique_ptr<Ledger>> Ledger::OpenExisting(const std::string& location) {
  if (IsPostgresLocation(location)) return PostgresLedger::OpenExisting(location);
  return SqliteLedger::OpenExisting(location);
}

Status Ledger::Append(const AttemptRow& row) {
  PDSERVE_ASSIGN_OR_RETURN(AppendOutcome outcome, AppendBatch({row}));
  if (!outcome.duplicates.empty()) {
    return {StatusCode::kAlreadyExists,
            "ledger " + path() + ": row " + outcome.duplicates[0] + " is already recorded"};
  }
  return Status::Ok();
}

}  // namespace pdserve::ledger
