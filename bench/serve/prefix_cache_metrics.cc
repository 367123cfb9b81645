#include "bench/serve/prefix_cache_metrics.h"

#include <algorithm>

#include "bench/serve/metrics.h"

namespace pdserve::bench {

int64_t WholeBlockTokens(int64_t tokens) {
  return tokens <= 0 ? 0 : tokens / kCacheBlockTokens * kCacheBlockTokens;
}

int64_t IdealLaterTurnCachedTokens(int64_t previous_prompt_tokens, int64_t previous_output_tokens,
                                   int64_t prompt_tokens) {
  return WholeBlockTokens(
      std::min(previous_prompt_tokens + previous_output_tokens - 1, prompt_tokens - 1));
}

int64_t IdealSharedPrefixCachedTokens(int64_t shared_tokens, int64_t prompt_tokens) {
  return WholeBlockTokens(std::min(shared_tokens, prompt_tokens - 1));
}

PrefixCacheMetrics CalculatePrefixCacheMetrics(const std::vector<RequestRecord>& records) {
  PrefixCacheMetrics m;
  std::vector<std::vector<double>> ttft_by_turn;
  std::vector<double> later;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    m.prompt_tokens += r.prompt_tokens;
    if (r.cached_tokens >= 0) {
      ++m.reporting_requests;
      m.cached_tokens += r.cached_tokens;
      if (r.cached_tokens > r.prompt_tokens) ++m.cached_above_prompt;
    }
    if (r.ideal_cached_tokens >= 0) {
      ++m.ideal_requests;
      m.ideal_cached_tokens += r.ideal_cached_tokens;
    }
    if (r.turn >= 0) {
      m.multi_turn = true;
      size_t turn = static_cast<size_t>(r.turn);
      if (ttft_by_turn.size() <= turn) ttft_by_turn.resize(turn + 1);
      ttft_by_turn[turn].push_back(r.ttft_s);
      if (turn > 0) later.push_back(r.ttft_s);
    }
  }
  auto share = [](int64_t part, int64_t whole) {
    return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
  };
  m.cached_share = share(m.cached_tokens, m.prompt_tokens);
  m.ideal_cached_share = share(m.ideal_cached_tokens, m.prompt_tokens);
  m.share_of_ideal = share(m.cached_tokens, m.ideal_cached_tokens);
  auto median_ms = [](const std::vector<double>& seconds) {
    return seconds.empty() ? 0.0 : Percentile(seconds, 50) * 1000;
  };
  for (const std::vector<double>& ttfts : ttft_by_turn) {
    m.median_ttft_ms_by_turn.push_back(median_ms(ttfts));
  }
  if (!ttft_by_turn.empty()) m.median_ttft_ms_first_turn = median_ms(ttft_by_turn[0]);
  m.median_ttft_ms_later_turns = median_ms(later);
  return m;
}

}  // namespace pdserve::bench
