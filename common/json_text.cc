#include "common/json_text.h"

#include <algorithm>

namespace pdserve {

using nlohmann::json;

std::string DumpJson(const json& v, int indent) {
  return v.dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string DescribeJson(const json& v) {
  if (v.is_array()) {
    return v.empty() ? "an empty array" : "an array of " + std::to_string(v.size());
  }
  if (v.is_object()) return v.empty() ? "an empty object" : "an object";
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    constexpr size_t kMaxQuoted = 64;
    if (s.size() <= kMaxQuoted) return DumpJson(v);
    size_t cut = kMaxQuoted;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // whole chars
    return DumpJson(json(s.substr(0, cut))) + "...";
  }
  return v.dump();  // number, boolean, null: no strings, no nesting
}

int JsonNestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        deepest = std::max(deepest, ++depth);
        break;
      case ']':
      case '}':
        depth = std::max(0, depth - 1);
        break;
      default:
        break;
    }
  }
  return deepest;
}

}  // namespace pdserve
