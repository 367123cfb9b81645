// Replaying a Mooncake trace (Mooncake's published request traces, JSONL): one request per line,
// {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}, where each hash id
// stands for a block of kMooncakeBlockTokens prompt tokens and equal ids mean equal prefixes. The
// trace carries no text, so each id is given its own words, the same for the same id in every
// run (the words drawn from a generator seeded by the id), and a prompt is its blocks' words in
// order, cut to input_length words (one token each in common BPE vocabs); words past the last
// block are unique to the request. Requests are sent at their timestamps, relative to the
// earliest, times a scale. The ideal cached tokens of a request (prefix_cache_metrics.h) are the
// words of its leading blocks already sent, up to the first block sent shorter than it uses it.
// Pure functions over files and values: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/serve/dataset.h"
#include "common/status.h"

namespace pdserve::bench {

inline constexpr int64_t kMooncakeBlockTokens = 512;

struct TraceRequest {
  BenchPrompt prompt;
  double send_offset_s = 0;  // after the earliest timestamp, scaled
  int64_t ideal_cached_tokens = 0;
};

struct MooncakeTraceOptions {
  int64_t max_requests = 1000;              // the first this many lines with a request
  double time_scale = 1.0;                  // send offset = (timestamp - earliest) x scale; > 0
  std::optional<int64_t> fixed_output_len;  // replaces every output_length
};

// The words of hash id `hash_id`'s block: its first `words` words (a prefix of its full block).
std::string MooncakeBlockText(uint64_t hash_id, int64_t words);

// Requests in send order (by timestamp, file order among equals). InvalidArgument naming the file
// and line for a line that is not a JSON object, or lacks or misstates a field.
Result<std::vector<TraceRequest>> LoadMooncakeTrace(const std::string& path,
                                                    const MooncakeTraceOptions& options,
                                                    const TokenCounter& counter);

}  // namespace pdserve::bench
