// PostgresBudgets: tenants' rate-limit budgets that several gateways draw from, kept in the
// PostgreSQL database of their shared ledger (table pdserve_budgets), so that N gateways allow a
// tenant its limit once, not N times (gateway/tenant_quota.h leases from it). One token bucket
// per tenant and kind ("requests", "tokens"), as TenantQuota's: it holds at most one minute's
// limit, starts full and refills at limit/60 per second by the database's clock; Take draws from
// it in one statement (its row locked meanwhile), so concurrent gateways never take the same
// budget twice.
//
// Threads: any; one mutex serialises the connection, which is opened again after a drop (the call
// that found it dropped fails with Unavailable).
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"

struct pg_conn;

namespace pdserve::ledger {

class PostgresBudgets {
 public:
  // Connects and creates the table if missing. `uri`: a postgresql:// connection URI.
  static Result<std::unique_ptr<PostgresBudgets>> Open(const std::string& uri);
  ~PostgresBudgets();
  PostgresBudgets(const PostgresBudgets&) = delete;
  PostgresBudgets& operator=(const PostgresBudgets&) = delete;

  // Takes up to `want` from the bucket of `tenant` and `kind` whose limit is `per_minute`; how
  // much it took (0 when empty). A limit that changed applies from this call on.
  Result<double> Take(const std::string& tenant, const std::string& kind, double per_minute,
                      double want);

 private:
  PostgresBudgets(std::string uri);
  Status Connect();  // under mu_

  const std::string uri_, shown_;
  std::mutex mu_;
  pg_conn* conn_ = nullptr;  // guarded by mu_
};

}  // namespace pdserve::ledger
