// ApiKeys: API keys mapped to tenants, loaded from a file that stores only SHA-256 hashes of the
// keys, with each tenant's rate limits. File format, one entry per line:
//
//   sha256:<64 hex digits> <tenant> [rpm=N] [tpm=N]
//   key:<plain key> <tenant> [rpm=N] [tpm=N]     (hashed at load and never kept; for hand-written
//                                                 files)
//   default [rpm=N] [tpm=N]                      (limits of tenants that set none)
//
// rpm: requests per minute, tpm: tokens (prompt + max_tokens) per minute; 0 or absent: no limit
// (TenantQuota says how they are counted). A tenant's limits may be given on any of its key lines;
// two lines that give one tenant different limits are an error. A file without limits reads as
// before. Blank lines and lines starting with # are skipped. Immutable after Load; any thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "gateway/tenant_quota.h"

namespace pdserve::gateway {

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

 private:
  std::map<std::string, std::string> tenants_;  // sha256 hex -> tenant
  std::map<std::string, TenantLimits> limits_;  // tenant -> its limits
  TenantLimits default_limits_;
};

}  // namespace pdserve::gateway
