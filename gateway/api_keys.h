// ApiKeys: API keys mapped to tenants, loaded from a file that stores only SHA-256 hashes of the
// keys. File format: one key per line, `sha256:<64 hex digits> <tenant>` (or, for convenience
// when writing the file by hand, `key:<plain key> <tenant>`, hashed at load and never kept);
// blank lines and lines starting with # are skipped. Immutable after Load; any thread.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace pdserve::gateway {

class ApiKeys {
 public:
  static Result<std::shared_ptr<const ApiKeys>> Load(const std::string& path);
  static std::string Sha256Hex(const std::string& text);

  // The tenant of the key in an "Authorization: Bearer <key>" header, if it is known.
  std::optional<std::string> TenantFor(const std::string& key) const;
  size_t size() const { return tenants_.size(); }

 private:
  std::map<std::string, std::string> tenants_;  // sha256 hex -> tenant
};

}  // namespace pdserve::gateway
