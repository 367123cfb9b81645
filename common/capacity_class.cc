#include "common/capacity_class.h"

#include <array>
#include <string>
#include <utility>

namespace pdserve {
namespace {

constexpr std::array<std::pair<CapacityClass, std::string_view>, 4> kClassText = {{
    {CapacityClass::kNone, ""},
    {CapacityClass::kReserved, "reserved"},
    {CapacityClass::kBurst, "burst"},
    {CapacityClass::kApi, "api"},
}};

}  // namespace

std::string_view ToString(CapacityClass capacity_class) {
  for (const auto& [value, text] : kClassText) {
    if (value == capacity_class) return text;
  }
  return "?";  // not reached: every enumerator is in the table
}

Result<CapacityClass> ParseCapacityClass(std::string_view text) {
  for (const auto& [value, t] : kClassText) {
    if (t == text) return value;
  }
  return InvalidArgument("unknown capacity class '" + std::string(text) + "'");
}

Result<CapacityClass> ParseWorkerCapacityClass(std::string_view text) {
  auto parsed = ParseCapacityClass(text);
  if (parsed.ok() && (*parsed == CapacityClass::kReserved || *parsed == CapacityClass::kBurst)) {
    return parsed;
  }
  return InvalidArgument("capacity class must be reserved or burst, got '" + std::string(text) +
                         "'");
}

}  // namespace pdserve
