// A buyer's acceptance thresholds (`--require "kv_gbps_at_64MiB>=20 ttft_p99_ms<=800"`) and the
// verdict they give over an acceptance JSON (acceptance.h). Metrics come in two kinds:
//  - per serving run: ttft|tpot|itl|e2el _ mean|median|pNN _ms, goodput_rps, request_rps,
//    output_tokens_per_s, total_tokens_per_s, usd_per_1m_output_tokens, usd_per_request,
//    failed_requests, mfu. A sweep passes these when one of its runs meets all of them together
//    (one operating point); the report names that run, or, when none does, the run that misses
//    the fewest (ties: the higher request throughput) and its figures.
//  - per acceptance: kv_gbps_at_SIZE and kv_ratio_at_SIZE (SIZE as 64MiB, 512KiB, 1GiB or bytes,
//    a size the KV test measured), scaling_efficiency.
// A metric that was not measured (no --goodput SLO, no price, no such KV size) fails its
// threshold and says why. Pure functions: thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace pdserve::bench {

struct Threshold {
  std::string text;    // as given, e.g. "ttft_p99_ms<=800"
  std::string metric;  // "ttft_p99_ms"
  std::string op;      // ">=", "<=", ">" or "<"
  double value = 0;
};

// Parses expressions separated by white space, in one or several strings. Errors name the
// expression: an unknown metric (with the list of known ones), a missing or unknown operator, a
// value that is not a finite number.
Result<std::vector<Threshold>> ParseThresholds(const std::vector<std::string>& expressions);

// "64MiB" -> 67108864; also KiB, GiB and plain bytes.
Result<uint64_t> ParseByteSize(std::string_view text);
// 67108864 -> "64MiB" (the largest binary unit that divides it; bytes otherwise).
std::string ByteSizeName(uint64_t bytes);

// The measured value of `metric` in one serving run's result JSON (report.h's field names) plus
// its "mfu" (acceptance.h), or an error saying why it is missing.
Result<double> RunMetric(const nlohmann::json& run, const std::string& metric);
// The measured value of a per-acceptance metric (kv_*, scaling_efficiency) in an acceptance JSON.
Result<double> AcceptanceMetric(const nlohmann::json& acceptance, const std::string& metric);
bool IsRunMetric(const std::string& metric);

// {"result": "PASS"|"FAIL"|"NONE", "thresholds": [{"threshold", "metric", "op", "value",
// "measured" (number or null), "pass", "note"}], "run": {"index", "request_rate"} or null,
// "rule": how a sweep is judged}. "NONE" when `thresholds` is empty.
nlohmann::json Verdict(const nlohmann::json& acceptance, const std::vector<Threshold>& thresholds);

}  // namespace pdserve::bench
