// ApiKeys: API keys mapped to tenants, loaded from a file that stores only SHA-256 hashes of the
// keys, with each tenant's rate limits. File format, one entry per line:
//
//   sha256:<64 hex digits> <tenant> [OPTION...]
//   key:<plain key> <tenant> [OPTION...]   (hashed at load and never kept; for hand-written files)
//   default [OPTION...]                    (what tenants that set none get)
//
// Options: rpm=N requests per minute, tpm=N tokens (prompt + max_tokens) per minute, 0 or absent:
// no limit (TenantQuota says how they are counted); weight=X the tenant's share of the admission
// queue against other waiting tenants (default 1); ttft_slo_ms=N its TTFT objective, past which
// a predicted wait is refused at once (0 or absent: the gateway's --ttft-slo-ms);
// overflow=never|overflow|cheapest where its requests may go beyond self-hosted workers (never,
// the default: they wait or are refused; overflow: to an external upstream when admission
// predicts its TTFT objective would be missed; cheapest: that, and also when the upstream is
// cheaper than self-hosted workers have been lately; gateway/completion_call.h, "Overflow");
// zones=Z1,Z2 the zones of the workers (their --zone) its requests may use, and no others (absent:
// any; a tenant with zones never overflows, as upstreams have none). A tenant's options may be
// given on any of its key lines; two lines that give one tenant different ones are an error. Blank
// lines and lines starting with # are skipped. Immutable after Load; any thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "common/status.h"
#include "gateway/tenant_quota.h"
#include "router/external_upstream.h"

namespace pdserve::gateway {

// How the admission queue treats a tenant's requests.
struct TenantAdmission {
  double weight = 1;        // > 0
  int64_t ttft_slo_ms = 0;  // 0: the gateway's default
  router::OverflowRule overflow = router::OverflowRule::kNever;
  std::set<std::string> zones;  // the workers' zones its requests may use; empty: any
  bool operator==(const TenantAdmission&) const = default;
};

class ApiKeys {
 public:
  static Result<std::shared_ptr<const ApiKeys>> Load(const std::string& path);
  // The same from the file's text already read; `path` names it in errors.
  static Result<std::shared_ptr<const ApiKeys>> Parse(const std::string& text,
                                                      const std::string& path);
  static std::string Sha256Hex(const std::string& text);

  // The tenant of the key in an "Authorization: Bearer <key>" header, if it is known.
  std::optional<std::string> TenantFor(const std::string& key) const;
  size_t size() const { return tenants_.size(); }

  // Limits set per tenant (tenants without any are absent), and the `default` line's limits.
  const std::map<std::string, TenantLimits>& limits() const { return limits_; }
  const TenantLimits& default_limits() const { return default_limits_; }
  // The tenant's admission options (the `default` line's for a tenant that set none).
  TenantAdmission AdmissionFor(const std::string& tenant) const;

 private:
  std::map<std::string, std::string> tenants_;  // sha256 hex -> tenant
  std::map<std::string, TenantLimits> limits_;  // tenant -> its limits
  TenantLimits default_limits_;
  std::map<std::string, TenantAdmission> admission_;  // tenants that set options of it
  TenantAdmission default_admission_;
};

}  // namespace pdserve::gateway
