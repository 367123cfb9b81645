#include "gateway/api_keys.h"

#include <openssl/evp.h>

#include <fstream>
#include <sstream>

namespace pdserve::gateway {

std::string ApiKeys::Sha256Hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

Result<std::shared_ptr<const ApiKeys>> ApiKeys::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(path + ": cannot open the API keys file");
  auto keys = std::make_shared<ApiKeys>();
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key, tenant, extra;
    fields >> key >> tenant >> extra;
    const std::string where = path + ":" + std::to_string(n);
    if (key.empty()) continue;
    if (tenant.empty() || !extra.empty())
      return InvalidArgument(where + ": expected '<sha256:HEX|key:KEY> <tenant>'");
    std::string hash;
    if (key.rfind("sha256:", 0) == 0) {
      hash = key.substr(7);
      if (hash.size() != 64 || hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
        return InvalidArgument(where + ": a sha256 hash is 64 lowercase hex digits");
      }
    } else if (key.rfind("key:", 0) == 0 && key.size() > 4) {
      hash = Sha256Hex(key.substr(4));
    } else {
      return InvalidArgument(where + ": a key starts with 'sha256:' or 'key:'");
    }
    keys->tenants_[hash] = tenant;
  }
  if (keys->tenants_.empty()) return InvalidArgument(path + ": no keys");
  return std::shared_ptr<const ApiKeys>(std::move(keys));
}

std::optional<std::string> ApiKeys::TenantFor(const std::string& key) const {
  auto it = tenants_.find(Sha256Hex(key));
  if (it == tenants_.end()) return std::nullopt;
  return it->second;
}

}  // namespace pdserve::gateway
