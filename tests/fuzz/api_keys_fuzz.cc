// Fuzz target: API keys files (gateway/api_keys.h), read by the gateway at start-up. A file either
// loads with at least one key, or is refused with an error naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gateway/api_keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto keys = pdserve::gateway::ApiKeys::Parse(text, "keys.txt");
  if (!keys.ok()) {
    if (keys.status().message().find("keys.txt") == std::string::npos) abort();
    return 0;
  }
  if ((*keys)->size() == 0) abort();
  for (const auto& [tenant, limits] : (*keys)->limits()) {
    if (limits.requests_per_minute < 0 || limits.tokens_per_minute < 0) abort();
  }
  // A plain key spelled in the file finds its tenant.
  const auto at = text.find("key:");
  if (at != std::string::npos && (at == 0 || text[at - 1] == '\n')) {
    const auto end = text.find_first_of(" \t\r\n\v\f", at);
    if (end != std::string::npos && end > at + 4) {
      (void)(*keys)->TenantFor(text.substr(at + 4, end - at - 4));
    }
  }
  return 0;
}
