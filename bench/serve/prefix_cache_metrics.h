// How much of the prompts a server's prefix cache served, against what one unbounded cache would
// have served for the same workload. The server's figure is OpenAI's
// usage.prompt_tokens_details.cached_tokens, per response. The ideal is the benchmark's own
// account of which prompt prefixes it sent before, in whole blocks of kCacheBlockTokens (engines
// cache full pages only), never the last prompt token (an engine computes at least one):
//  - a conversation's turn k > 0 shares with turn k-1 the whole earlier prompt and answer: ideal
//    = blocks(min(prompt(k-1) + output(k-1) - 1, prompt(k) - 1)), from the token counts the
//    server reported (the rendered template included) or the benchmark's own; the -1 is the
//    last answer token, which was sampled but never fed back, so it has no KV. Approximation: it
//    assumes the answer's text re-tokenises into the tokens generated, which holds when the model
//    stopped by itself and may miss a few tokens at the answer's end when max_tokens cut it;
//  - a first turn shares its system prompt with an earlier conversation that sent the same one:
//    ideal = blocks(min(system tokens, prompt - 1)), the template's few tokens before the system
//    text ignored;
//  - a Mooncake-trace request shares its leading hash ids already sent (mooncake_trace.h).
// Also the median TTFT per turn index of multi-turn runs: the cache's effect is on turns 2+.
// Pure functions over values: thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/serve/request_record.h"

namespace pdserve::bench {

inline constexpr int64_t kCacheBlockTokens = 16;

// The whole blocks in `tokens`, in tokens; 0 for tokens <= 0.
int64_t WholeBlockTokens(int64_t tokens);

// The ideal of turn k > 0, from turn k-1's prompt and output tokens and turn k's prompt tokens.
int64_t IdealLaterTurnCachedTokens(int64_t previous_prompt_tokens, int64_t previous_output_tokens,
                                   int64_t prompt_tokens);

// The ideal of a prompt whose first `shared_tokens` were sent before (a system prompt, leading
// trace blocks).
int64_t IdealSharedPrefixCachedTokens(int64_t shared_tokens, int64_t prompt_tokens);

struct PrefixCacheMetrics {
  // Successful requests whose response carried cached_tokens, and their sums.
  int64_t reporting_requests = 0;
  int64_t prompt_tokens = 0;  // of all successful requests
  int64_t cached_tokens = 0;
  double cached_share = 0;  // cached_tokens / prompt_tokens
  // Requests whose cached_tokens exceeds their prompt_tokens: a server bug.
  int64_t cached_above_prompt = 0;
  // Successful requests whose ideal is known, and their sum.
  int64_t ideal_requests = 0;
  int64_t ideal_cached_tokens = 0;
  double ideal_cached_share = 0;  // ideal_cached_tokens / prompt_tokens
  double share_of_ideal = 0;      // cached_tokens / ideal_cached_tokens; 0 when the ideal is 0
  // Multi-turn runs: the median TTFT (ms) of successful turns by turn index (entry 0: turn 1),
  // of first turns and of all later turns.
  bool multi_turn = false;
  std::vector<double> median_ttft_ms_by_turn;
  double median_ttft_ms_first_turn = 0;
  double median_ttft_ms_later_turns = 0;

  bool reported() const { return reporting_requests > 0; }
  bool ideal_known() const { return ideal_requests > 0; }
};

PrefixCacheMetrics CalculatePrefixCacheMetrics(const std::vector<RequestRecord>& records);

}  // namespace pdserve::bench
