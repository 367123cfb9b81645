#include "common/json_text.h"

#include <algorithm>
#include <cstdint>

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

bool IsUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    int more;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      more = 1, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      more = 2, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      more = 3, cp = c & 0x07;
    } else {
      return false;  // a continuation byte first, C0/C1 (overlong), or F5 and up
    }
    if (text.size() - i <= static_cast<size_t>(more)) return false;  // cut short
    for (int k = 1; k <= more; ++k) {
      const auto d = static_cast<unsigned char>(text[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3F);
    }
    if ((more == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
        (more == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
      return false;
    }
    i += more + 1;
  }
  return true;
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
