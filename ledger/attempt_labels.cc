// The labels' text; see attempt_labels.h.
#include "ledger/attempt_labels.h"

#include <array>
#include <string>
#include <utility>

namespace pdserve::ledger {
namespace {

constexpr std::array<std::pair<AttemptStatus, std::string_view>, 6> kStatusText = {{
    {AttemptStatus::kOk, "ok"},
    {AttemptStatus::kCancelled, "cancelled"},
    {AttemptStatus::kError, "error"},
    {AttemptStatus::kRetried, "retried"},
    {AttemptStatus::kResumed, "resumed"},
    {AttemptStatus::kRefused, "refused"},
}};

template <typename Enum, size_t N>
std::string_view TextOf(const std::array<std::pair<Enum, std::string_view>, N>& table, Enum e) {
  for (const auto& [value, text] : table) {
    if (value == e) return text;
  }
  return "?";  // not reached: every enumerator is in its table
}

template <typename Enum, size_t N>
Result<Enum> EnumOf(const std::array<std::pair<Enum, std::string_view>, N>& table,
                    std::string_view text, const char* what) {
  for (const auto& [value, t] : table) {
    if (t == text) return value;
  }
  return InvalidArgument(std::string("unknown ") + what + " '" + std::string(text) + "'");
}

}  // namespace

std::string_view ToString(AttemptStatus status) { return TextOf(kStatusText, status); }

Result<AttemptStatus> ParseAttemptStatus(std::string_view text) {
  return EnumOf(kStatusText, text, "attempt status");
}

bool IsAcceptedStatus(AttemptStatus status) {
  return status == AttemptStatus::kOk || status == AttemptStatus::kCancelled;
}

}  // namespace pdserve::ledger
