// The ledger commands' times on the command line (ParseTimeArg, FormatUnixTime); see ledger.h.
#include <cctype>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <string>
#include <string_view>

#include "ledger/ledger.h"

namespace pdserve::ledger {

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<double> ParseTimeArg(std::string_view text) {
  text = Trim(text);
  const std::string s(text);
  auto bad = [&] {
    return InvalidArgument("time '" + s +
                           "' is neither unix seconds nor ISO-8601 UTC (2026-11-29T10:00:00Z)");
  };
  if (s.empty()) return bad();
  if (s.find('-') == std::string::npos || s.front() == '-') {
    double value = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    // Up to the year 9999: NaN, infinity and 1e300 parse as numbers, and cannot be times.
    constexpr double kYear10000 = 253402300800.0;
    if (ec != std::errc() || end != s.data() + s.size() || !(value >= 0 && value < kYear10000)) {
      return bad();
    }
    return value;
  }
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, consumed = 0;
  double second = 0;
  std::string rest;
  if (std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &year, &month, &day, &consumed) != 3) return bad();
  rest = s.substr(consumed);
  if (!rest.empty()) {
    int n = 0;
    if (std::sscanf(rest.c_str(), "T%2d:%2d:%lf%n", &hour, &minute, &second, &n) != 3) {
      return bad();
    }
    rest = rest.substr(n);
    if (rest != "Z" && rest != "+00:00") return bad();
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second < 0 ||
      second >= 61) {
    return bad();
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  const time_t whole = timegm(&tm);
  if (tm.tm_mday != day) return bad();  // timegm normalised a day past the month's end
  return static_cast<double>(whole) + second;
}

std::string FormatUnixTime(double unix_seconds) {
  const time_t t = static_cast<time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace pdserve::ledger
