// Shared rate-limit budgets in PostgreSQL; see postgres_budgets.h.
#include "ledger/postgres_budgets.h"

#include <libpq-fe.h>

#include "ledger/postgres_support.h"

namespace pdserve::ledger {
namespace {

constexpr char kTable[] = R"sql(
CREATE TABLE IF NOT EXISTS pdserve_budgets(
  tenant TEXT NOT NULL, kind TEXT NOT NULL,
  level DOUBLE PRECISION NOT NULL, updated_unix DOUBLE PRECISION NOT NULL,
  granted DOUBLE PRECISION NOT NULL,
  PRIMARY KEY(tenant, kind)))sql";

// $1 tenant, $2 kind, $3 the limit per minute (the bucket's capacity), $4 what is wanted. The
// bucket is refilled to now (the statement's transaction time), then gives what it holds up to
// $4; the SET expressions read the row as it was.
constexpr char kTake[] = R"sql(
INSERT INTO pdserve_budgets AS b (tenant, kind, level, updated_unix, granted)
VALUES ($1, $2, $3::float8 - LEAST($4::float8, $3::float8), extract(epoch from now()),
        LEAST($4::float8, $3::float8))
ON CONFLICT (tenant, kind) DO UPDATE SET
  granted = LEAST($4::float8, GREATEST(0, LEAST($3::float8, b.level +
            GREATEST(0, extract(epoch from now()) - b.updated_unix) * $3::float8 / 60))),
  level = LEAST($3::float8, b.level +
          GREATEST(0, extract(epoch from now()) - b.updated_unix) * $3::float8 / 60) -
          LEAST($4::float8, GREATEST(0, LEAST($3::float8, b.level +
          GREATEST(0, extract(epoch from now()) - b.updated_unix) * $3::float8 / 60))),
  updated_unix = GREATEST(b.updated_unix, extract(epoch from now()))
RETURNING granted)sql";

}  // namespace

PostgresBudgets::PostgresBudgets(std::string uri)
    : uri_(std::move(uri)), shown_("budgets " + pg::RedactPassword(uri_)) {}

PostgresBudgets::~PostgresBudgets() {
  if (conn_) PQfinish(conn_);
}

Result<std::unique_ptr<PostgresBudgets>> PostgresBudgets::Open(const std::string& uri) {
  std::unique_ptr<PostgresBudgets> budgets(new PostgresBudgets(uri));
  std::lock_guard lock(budgets->mu_);
  PDSERVE_RETURN_IF_ERROR(budgets->Connect());
  return budgets;
}

Status PostgresBudgets::Connect() {
  if (conn_ && PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
  PDSERVE_RETURN_IF_ERROR(pg::Reconnect(uri_, shown_, &conn_));
  // Gateways starting together: the table is made once (the ledger's lock).
  PDSERVE_RETURN_IF_ERROR(pg::Run(conn_, shown_, "BEGIN").status());
  Status s = pg::Run(conn_, shown_, "SELECT pg_advisory_xact_lock(1885631350)").status();
  if (s.ok()) s = pg::Run(conn_, shown_, kTable).status();
  if (!s.ok()) {
    (void)pg::Run(conn_, shown_, "ROLLBACK");
    return s;
  }
  return pg::Run(conn_, shown_, "COMMIT").status();
}

Result<double> PostgresBudgets::Take(const std::string& tenant, const std::string& kind,
                                     double per_minute, double want) {
  std::lock_guard lock(mu_);
  PDSERVE_RETURN_IF_ERROR(Connect());
  pg::Params params;
  params.Bind(std::string_view(tenant));
  params.Bind(std::string_view(kind));
  params.Bind(per_minute);
  params.Bind(want);
  PDSERVE_ASSIGN_OR_RETURN(pg::ResultPtr result, pg::Run(conn_, shown_, kTake, params));
  if (PQntuples(result.get()) != 1) return Internal(shown_ + ": no grant returned");
  return pg::ResultRow(result.get(), 0).Real(0);
}

}  // namespace pdserve::ledger
