// Serving metrics computed from request records with the definitions of vLLM's
// `calculate_metrics` (vllm/benchmarks/serve.py), so numbers compare one to one with
// `vllm bench serve`:
//  - TTFT: first choice chunk minus send time, successful requests only.
//  - TPOT: (e2el - ttft) / (output_tokens - 1) per successful request with output_tokens > 1.
//  - ITL: every gap between consecutive choice chunks of every successful request, pooled.
//  - E2EL: last choice chunk minus send time.
//  - Mean, median, population std (numpy's default) and percentiles with linear interpolation
//    (numpy.percentile's default); an empty list reads as [0], as in vLLM.
//  - Goodput: successful requests meeting every given SLO (ttft, tpot, e2el in ms, inclusive),
//    where a request with output_tokens <= 1 has tpot 0, per second of benchmark duration.
// Pure functions over values: thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench/serve/request_record.h"
#include "common/status.h"

namespace pdserve::bench {

// --goodput "ttft:MS tpot:MS e2el:MS"; absent keys are not checked.
struct GoodputSlo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

// Parses entries "KEY:VALUE" (KEY in ttft, tpot, e2el; VALUE >= 0 ms).
Result<GoodputSlo> ParseGoodput(const std::vector<std::string>& entries);
// Parses "50,90,99" (each in (0, 100]); an empty string is an error.
Result<std::vector<double>> ParsePercentiles(std::string_view text);
// "99" for 99, "99.9" for 99.9: the spelling vLLM uses in field names (p99_ttft_ms).
std::string PercentileLabel(double p);

// numpy.percentile(values, p) with linear interpolation; values need not be sorted.
double Percentile(std::vector<double> values, double p);

struct LatencyStats {
  double mean_ms = 0;
  double median_ms = 0;
  double std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

// Stats of `seconds` reported in milliseconds; an empty input reads as [0].
LatencyStats SummarizeLatencies(const std::vector<double>& seconds,
                                const std::vector<double>& percentiles);

struct BenchmarkMetrics {
  int64_t completed = 0;
  int64_t failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double request_throughput = 0;  // completed / duration
  double request_goodput = 0;     // good requests / duration (0 without SLOs)
  int64_t good_completed = 0;
  double output_throughput = 0;        // output tokens / duration
  double total_token_throughput = 0;   // (input + output tokens) / duration
  double max_output_tokens_per_s = 0;  // busiest one-second bucket of token arrivals
  LatencyStats ttft, tpot, itl, e2el;
  std::map<std::string, int64_t> failures_by_reason;  // FailureKindName -> count
};

BenchmarkMetrics CalculateMetrics(const std::vector<RequestRecord>& records, double duration_s,
                                  const std::vector<double>& percentiles, const GoodputSlo& slo);

}  // namespace pdserve::bench
