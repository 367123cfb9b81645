// What the load generator records about one request it sent: when it started, when each streamed
// token arrived, how many tokens went each way and, on failure, why. Plain values: built by the
// HTTP client on its io_context thread, then handed over whole; safe to copy between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pdserve::bench {

// Why a request did not succeed. Each has a stable name used in reports ("timeout", ...).
enum class FailureKind {
  kNone = 0,
  kConnect,          // the TCP connection could not be made (refused, unreachable, no fds)
  kTimeout,          // the per-request deadline passed before the stream ended
  kHttpStatus,       // the server answered with a status other than 200
  kClosedMidStream,  // the connection ended before the response did
  kBadResponse,      // malformed HTTP, an SSE data line that is not JSON, or an unexpected shape
  kStreamError,      // the server sent an error event inside the stream
  kNoTokens,         // the stream ended cleanly but carried no choice chunk (vLLM counts it failed)
  kIo,               // any other socket error
};

std::string_view FailureKindName(FailureKind kind);

// Where a request's output token count came from, best first.
enum class TokenCountSource {
  kServerUsage,  // the usage chunk (`stream_options.include_usage`)
  kTokenizer,    // the generated text encoded with the --tokenizer tokenizer.json
  kChunks,       // the number of streamed choice chunks (one token per chunk on vLLM/SGLang)
};

std::string_view TokenCountSourceName(TokenCountSource source);

struct RequestRecord {
  int64_t index = -1;         // position in the benchmark's request list
  double start_s = 0;         // send time, seconds after the benchmark started
  double ttft_s = 0;          // first choice chunk minus start (0 if none)
  double latency_s = 0;       // last choice chunk minus start (vLLM's e2el)
  std::vector<double> itl_s;  // gaps between consecutive choice chunks
  int64_t prompt_tokens = 0;  // the server's usage.prompt_tokens, else the dataset's count
  int64_t output_tokens = 0;  // see output_token_source
  TokenCountSource output_token_source = TokenCountSource::kChunks;
  bool server_reported_prompt_tokens = false;
  // usage.prompt_tokens_details.cached_tokens; -1 when the server reported none.
  int64_t cached_tokens = -1;
  // What one unbounded prefix cache would hit for this request (prefix_cache_metrics.h); -1 when
  // the workload does not say (single-turn random, ShareGPT and JSONL prompts).
  int64_t ideal_cached_tokens = -1;
  int64_t conversation = -1;  // multi-turn: the conversation's index; -1 for single requests
  int64_t turn = -1;          // multi-turn: 0 for the first turn; -1 for single requests
  int64_t chunks = 0;         // choice chunks received
  bool success = false;
  FailureKind failure = FailureKind::kNone;
  int http_status = 0;         // 0 when no status line was read
  int retry_after_s = -1;      // the response's Retry-After in seconds; -1: none (or not a number)
  std::string error;           // human-readable reason; the server's message when it sent one
  std::string generated_text;  // the streamed text, concatenated
};

}  // namespace pdserve::bench
