// The x-pdserve-tags parser; see request_tags.h.
#include "gateway/request_tags.h"

#include <cctype>

#include "common/utf8.h"

namespace pdserve::gateway {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsTagKey(std::string_view key) {
  if (key.empty() || key.size() > 64) return false;
  for (char c : key) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

}  // namespace

Result<std::map<std::string, std::string>> ParseTags(std::string_view text) {
  std::map<std::string, std::string> tags;
  while (!Trim(text).empty()) {
    const size_t comma = text.find(',');
    std::string_view item = Trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument("tag '" + std::string(item) + "' is not key=value");
    }
    const std::string_view key = Trim(item.substr(0, eq)), value = Trim(item.substr(eq + 1));
    if (!IsTagKey(key)) {
      return InvalidArgument("tag key '" + std::string(key) +
                             "' must be 1-64 letters, digits, '_', '.' or '-'");
    }
    if (value.find('=') != std::string_view::npos) {
      return InvalidArgument("tag value '" + std::string(value) + "' holds '='");
    }
    if (FindInvalidUtf8(value)) {  // it goes into the ledger, and out again as JSON
      return InvalidArgument("tag value of '" + std::string(key) + "' is not UTF-8");
    }
    tags[std::string(key)] = std::string(value);
  }
  return tags;
}

}  // namespace pdserve::gateway
