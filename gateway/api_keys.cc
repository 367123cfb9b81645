#include "gateway/api_keys.h"

#include <openssl/evp.h>

#include <charconv>
#include <fstream>
#include <sstream>
#include <vector>

namespace pdserve::gateway {

namespace {

// Reads `rpm=N` and `tpm=N` options into `limits`; `where` prefixes the error.
Status ParseLimits(const std::vector<std::string>& options, const std::string& where,
                   TenantLimits* limits, bool* any) {
  bool seen_rpm = false, seen_tpm = false;
  for (const std::string& option : options) {
    const auto eq = option.find('=');
    const std::string name = option.substr(0, eq);
    const bool rpm = name == "rpm", tpm = name == "tpm";
    if (eq == std::string::npos || (!rpm && !tpm)) {
      return InvalidArgument(where + ": unknown option '" + option + "' (expected rpm=N or tpm=N)");
    }
    if ((rpm && seen_rpm) || (tpm && seen_tpm)) {
      return InvalidArgument(where + ": '" + name + "' given twice");
    }
    int64_t value = -1;
    const char* begin = option.data() + eq + 1;
    const char* end = option.data() + option.size();
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr != end || begin == end || value < 0) {
      return InvalidArgument(where + ": '" + name + "' takes a whole number >= 0, not '" +
                             option.substr(eq + 1) + "'");
    }
    (rpm ? limits->requests_per_minute : limits->tokens_per_minute) = value;
    (rpm ? seen_rpm : seen_tpm) = true;
    *any = true;
  }
  return Status::Ok();
}

}  // namespace

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
  std::ifstream file(path);
  if (!file) return NotFound(path + ": cannot open the API keys file");
  std::ostringstream text;
  text << file.rdbuf();
  return Parse(text.str(), path);
}

Result<std::shared_ptr<const ApiKeys>> ApiKeys::Parse(const std::string& text,
                                                      const std::string& path) {
  std::istringstream in(text);
  auto keys = std::make_shared<ApiKeys>();
  bool seen_default = false;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::vector<std::string> words;
    for (std::string word; fields >> word;) words.push_back(word);
    const std::string where = path + ":" + std::to_string(n);
    if (words.empty()) continue;
    if (words[0] == "default") {
      if (seen_default) return InvalidArgument(where + ": a second 'default' line");
      seen_default = true;
      bool any = false;
      const std::vector<std::string> options(words.begin() + 1, words.end());
      PDSERVE_RETURN_IF_ERROR(ParseLimits(options, where, &keys->default_limits_, &any));
      continue;
    }
    const std::string& key = words[0];
    if (words.size() < 2 || words[1].find('=') != std::string::npos) {
      return InvalidArgument(where + ": expected '<sha256:HEX|key:KEY> <tenant> [rpm=N] [tpm=N]'");
    }
    const std::string& tenant = words[1];
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
    TenantLimits limits;
    bool any = false;
    const std::vector<std::string> options(words.begin() + 2, words.end());
    PDSERVE_RETURN_IF_ERROR(ParseLimits(options, where, &limits, &any));
    if (any) {
      auto [it, inserted] = keys->limits_.try_emplace(tenant, limits);
      if (!inserted && !(it->second == limits)) {
        return InvalidArgument(where + ": tenant '" + tenant +
                               "' was given other limits on an earlier line");
      }
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
