#include "gateway/api_keys.h"

#include <openssl/evp.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

namespace pdserve::gateway {

namespace {

// Reads a line's options (rpm, tpm, weight, ttft_slo_ms, overflow) into `limits` and `admission`,
// and says whether any of each was given; `where` prefixes the error.
Status ParseOptions(const std::vector<std::string>& options, const std::string& where,
                    TenantLimits* limits, TenantAdmission* admission, bool* any_limit,
                    bool* any_admission) {
  std::set<std::string> seen;
  for (const std::string& option : options) {
    const auto eq = option.find('=');
    const std::string name = option.substr(0, eq);
    const bool known = name == "rpm" || name == "tpm" || name == "weight" ||
                       name == "ttft_slo_ms" || name == "overflow" || name == "zones";
    if (eq == std::string::npos || !known) {
      return InvalidArgument(
          where + ": unknown option '" + option +
          "' (expected rpm=N, tpm=N, weight=X, ttft_slo_ms=N, overflow=RULE or zones=Z1,Z2)");
    }
    if (!seen.insert(name).second) return InvalidArgument(where + ": '" + name + "' given twice");
    const std::string text = option.substr(eq + 1);
    if (name == "zones") {
      std::istringstream list(text);
      for (std::string zone; std::getline(list, zone, ',');) {
        if (zone.empty()) {
          return InvalidArgument(where + ": 'zones' takes zone names separated by commas, not '" +
                                 text + "'");
        }
        admission->zones.insert(zone);
      }
      if (admission->zones.empty()) {
        return InvalidArgument(where + ": 'zones' names no zone");
      }
      *any_admission = true;
      continue;
    }
    if (name == "overflow") {
      auto rule = router::ParseOverflowRule(text);
      if (!rule.ok()) return InvalidArgument(where + ": " + rule.status().message());
      admission->overflow = *rule;
      *any_admission = true;
      continue;
    }
    if (name == "weight") {
      double value = 0;
      auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || !(value > 0) ||
          !std::isfinite(value)) {
        return InvalidArgument(where + ": 'weight' takes a number > 0, not '" + text + "'");
      }
      admission->weight = value;
      *any_admission = true;
      continue;
    }
    int64_t value = -1;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || value < 0) {
      return InvalidArgument(where + ": '" + name + "' takes a whole number >= 0, not '" + text +
                             "'");
    }
    if (name == "ttft_slo_ms") {
      admission->ttft_slo_ms = value;
      *any_admission = true;
    } else {
      (name == "rpm" ? limits->requests_per_minute : limits->tokens_per_minute) = value;
      *any_limit = true;
    }
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
      bool any_limit = false, any_admission = false;
      const std::vector<std::string> options(words.begin() + 1, words.end());
      PDSERVE_RETURN_IF_ERROR(ParseOptions(options, where, &keys->default_limits_,
                                           &keys->default_admission_, &any_limit, &any_admission));
      continue;
    }
    const std::string& key = words[0];
    if (words.size() < 2 || words[1].find('=') != std::string::npos) {
      return InvalidArgument(where + ": expected '<sha256:HEX|key:KEY> <tenant> [OPTION...]'");
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
    TenantAdmission admission;
    bool any_limit = false, any_admission = false;
    const std::vector<std::string> options(words.begin() + 2, words.end());
    PDSERVE_RETURN_IF_ERROR(
        ParseOptions(options, where, &limits, &admission, &any_limit, &any_admission));
    if (any_limit) {
      auto [it, inserted] = keys->limits_.try_emplace(tenant, limits);
      if (!inserted && !(it->second == limits)) {
        return InvalidArgument(where + ": tenant '" + tenant +
                               "' was given other limits on an earlier line");
      }
    }
    if (any_admission) {
      auto [it, inserted] = keys->admission_.try_emplace(tenant, admission);
      if (!inserted && !(it->second == admission)) {
        return InvalidArgument(
            where + ": tenant '" + tenant +
            "' was given another weight, ttft_slo_ms, overflow or zones on an earlier line");
      }
    }
    keys->tenants_[hash] = tenant;
  }
  if (keys->tenants_.empty()) return InvalidArgument(path + ": no keys");
  return std::shared_ptr<const ApiKeys>(std::move(keys));
}

TenantAdmission ApiKeys::AdmissionFor(const std::string& tenant) const {
  auto it = admission_.find(tenant);
  return it == admission_.end() ? default_admission_ : it->second;
}

std::optional<std::string> ApiKeys::TenantFor(const std::string& key) const {
  auto it = tenants_.find(Sha256Hex(key));
  if (it == tenants_.end()) return std::nullopt;
  return it->second;
}

}  // namespace pdserve::gateway
