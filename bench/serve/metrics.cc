#include "bench/serve/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "common/percentile.h"

namespace pdserve::bench {
namespace {

Result<double> ParseNumber(std::string_view text, std::string_view what) {
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return InvalidArgument(fmt::format("{}: '{}' is not a number", what, text));
  }
  return value;
}

}  // namespace

std::string_view FailureKindName(FailureKind kind) {
  switch (kind) {
    case FailureKind::kNone:
      return "none";
    case FailureKind::kConnect:
      return "connect";
    case FailureKind::kTimeout:
      return "timeout";
    case FailureKind::kHttpStatus:
      return "http_status";
    case FailureKind::kClosedMidStream:
      return "closed_mid_stream";
    case FailureKind::kBadResponse:
      return "bad_response";
    case FailureKind::kStreamError:
      return "stream_error";
    case FailureKind::kNoTokens:
      return "no_tokens";
    case FailureKind::kIo:
      return "io";
  }
  return "unknown";
}

std::string_view TokenCountSourceName(TokenCountSource source) {
  switch (source) {
    case TokenCountSource::kServerUsage:
      return "server_usage";
    case TokenCountSource::kTokenizer:
      return "tokenizer";
    case TokenCountSource::kChunks:
      return "chunks";
  }
  return "unknown";
}

Result<GoodputSlo> ParseGoodput(const std::vector<std::string>& entries) {
  GoodputSlo slo;
  for (const std::string& entry : entries) {
    size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      return InvalidArgument(
          fmt::format("--goodput '{}': expected KEY:VALUE with KEY ttft, tpot or e2el", entry));
    }
    std::string key = entry.substr(0, colon);
    PDSERVE_ASSIGN_OR_RETURN(
        double ms, ParseNumber(std::string_view(entry).substr(colon + 1), "--goodput " + key));
    if (ms < 0) return InvalidArgument(fmt::format("--goodput {}: {} ms is negative", key, ms));
    if (key == "ttft") {
      slo.ttft_ms = ms;
    } else if (key == "tpot") {
      slo.tpot_ms = ms;
    } else if (key == "e2el") {
      slo.e2el_ms = ms;
    } else {
      return InvalidArgument(
          fmt::format("--goodput: unknown metric '{}' (use ttft, tpot or e2el)", key));
    }
  }
  return slo;
}

Result<std::vector<double>> ParsePercentiles(std::string_view text) {
  std::vector<double> out;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    PDSERVE_ASSIGN_OR_RETURN(double p, ParseNumber(item, "percentile"));
    if (p <= 0 || p > 100) {
      return InvalidArgument(fmt::format("percentile {} is outside (0, 100]", p));
    }
    out.push_back(p);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (out.empty()) return InvalidArgument("no percentiles given");
  return out;
}

std::string PercentileLabel(double p) {
  if (p == std::floor(p)) return fmt::format("{}", static_cast<int64_t>(p));
  return fmt::format("{}", p);
}

double Percentile(std::vector<double> values, double p) {
  return Quantile(std::move(values), p / 100.0);
}

LatencyStats SummarizeLatencies(const std::vector<double>& seconds,
                                const std::vector<double>& percentiles) {
  std::vector<double> values = seconds.empty() ? std::vector<double>{0.0} : seconds;
  LatencyStats stats;
  double n = static_cast<double>(values.size());
  double mean = std::accumulate(values.begin(), values.end(), 0.0) / n;
  double sq = 0;
  for (double v : values) sq += (v - mean) * (v - mean);
  stats.mean_ms = mean * 1000;
  stats.std_ms = std::sqrt(sq / n) * 1000;
  std::sort(values.begin(), values.end());
  stats.median_ms = QuantileOfSorted(values, 0.5) * 1000;
  for (double p : percentiles) {
    stats.percentiles_ms.emplace_back(p, QuantileOfSorted(values, p / 100.0) * 1000);
  }
  return stats;
}

BenchmarkMetrics CalculateMetrics(const std::vector<RequestRecord>& records, double duration_s,
                                  const std::vector<double>& percentiles, const GoodputSlo& slo) {
  BenchmarkMetrics m;
  std::vector<double> ttfts, tpots, all_tpots, itls, e2els;
  std::map<int64_t, int64_t> tokens_per_second;
  for (const RequestRecord& r : records) {
    if (!r.success) {
      ++m.failed;
      ++m.failures_by_reason[std::string(FailureKindName(r.failure))];
      continue;
    }
    ++m.completed;
    m.total_input += r.prompt_tokens;
    m.total_output += r.output_tokens;
    double tpot = 0;
    if (r.output_tokens > 1) {
      tpot = (r.latency_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1);
      tpots.push_back(tpot);
    }
    all_tpots.push_back(tpot);
    itls.insert(itls.end(), r.itl_s.begin(), r.itl_s.end());
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.latency_s);
    // Token arrival times for the peak: the first chunk, then each gap (chunks stand in for
    // tokens, as in vLLM).
    double t = r.start_s + r.ttft_s;
    auto add = [&](double at) { tokens_per_second[static_cast<int64_t>(std::floor(at))] += 1; };
    if (r.chunks > 0) add(t);
    for (double gap : r.itl_s) add(t += gap);
  }
  for (auto& [second, count] : tokens_per_second) {
    m.max_output_tokens_per_s = std::max(m.max_output_tokens_per_s, static_cast<double>(count));
  }
  if (slo.any()) {
    for (size_t i = 0; i < ttfts.size(); ++i) {
      // vLLM's test, SLO in seconds >= value, inclusive.
      bool good = (!slo.ttft_ms || *slo.ttft_ms / 1000 >= ttfts[i]) &&
                  (!slo.tpot_ms || *slo.tpot_ms / 1000 >= all_tpots[i]) &&
                  (!slo.e2el_ms || *slo.e2el_ms / 1000 >= e2els[i]);
      if (good) ++m.good_completed;
    }
  }
  if (duration_s > 0) {
    m.request_throughput = m.completed / duration_s;
    m.request_goodput = m.good_completed / duration_s;
    m.output_throughput = m.total_output / duration_s;
    m.total_token_throughput = (m.total_input + m.total_output) / duration_s;
  }
  m.ttft = SummarizeLatencies(ttfts, percentiles);
  m.tpot = SummarizeLatencies(tpots, percentiles);
  m.itl = SummarizeLatencies(itls, percentiles);
  m.e2el = SummarizeLatencies(e2els, percentiles);
  return m;
}

}  // namespace pdserve::bench
