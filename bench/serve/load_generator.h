// Runs one serving benchmark: sends requests to an OpenAI-compatible endpoint on the arrival
// schedule of arrivals.h (or given send times, as a trace replays), at most max_concurrency in
// flight (later arrivals wait their turn, as behind vLLM's semaphore), and collects one
// RequestRecord per request. What arrives is a unit of a LoadScript: one prepared request
// (RunLoad), or a conversation whose turns go one after another, each once the previous answer
// arrived (conversation_runner.h); a unit holds its concurrency slot until its last request ends.
// Everything runs on one io_context on the calling thread. Thread-safety: RunLoad and RunScript
// may be called from any thread; calls share nothing.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/serve/dataset.h"
#include "bench/serve/http_client.h"
#include "bench/serve/request_record.h"
#include "common/status.h"

namespace pdserve::bench {

// What goes into each request body.
struct RequestBodyOptions {
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions (messages, chat chunks)
  std::string model;                         // required by most servers
  bool ignore_eos = false;                   // vLLM's extension: generate exactly max_tokens
  std::string extra_body_json;               // a JSON object merged into every body ("" = none)
};

// One request ready to send: its body is built once, before the clock starts.
struct PreparedRequest {
  std::string body;
  int64_t prompt_tokens = 0;
  int64_t output_len = 0;
  int64_t ideal_cached_tokens = -1;  // copied into the record; -1: unknown
};

// --extra-body as a JSON object ({} when empty); InvalidArgument when it is not one.
Result<nlohmann::json> ParseExtraBody(const std::string& extra_body_json);

// One streaming body: `input` is the prompt (a string, for completions) or the chat messages (an
// array); max_tokens (completions) or max_completion_tokens (chat), then `extra` merged over it.
std::string RequestBody(const RequestBodyOptions& options, const nlohmann::json& extra,
                        nlohmann::json input, int64_t max_tokens);

// Bodies with "stream": true and "stream_options": {"include_usage": true}; max_tokens
// (completions) or max_completion_tokens (chat), as vLLM sends them.
Result<std::vector<PreparedRequest>> BuildRequests(const std::vector<BenchPrompt>& prompts,
                                                   const RequestBodyOptions& options);

struct LoadOptions {
  std::string endpoint = "/v1/completions";
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1.0;      // gamma shape of the gaps; 1 = Poisson
  int64_t max_concurrency = 0;  // units (requests, conversations) in flight at most; 0 = none
  uint64_t seed = 0;            // of the arrival schedule
  // When not empty: unit i arrives at send_offsets[i] seconds (non-decreasing, one per unit)
  // instead of on the rate's schedule.
  std::vector<double> send_offsets;
  StreamingClientOptions client;
  TokenCounter output_counter;  // counts output tokens when the server sends no usage
  bool show_progress = false;   // a progress line on stderr (callers pass isatty(2))
  std::string progress_label;   // printed before the bar
};

struct LoadRun {
  std::vector<RequestRecord> records;   // in request order; only requests that were sent
  int64_t requests_not_sent = 0;        // a script's requests given up (a turn after a failure)
  double duration_s = 0;                // first send to last completion (vLLM's duration)
  int64_t max_concurrent_requests = 0;  // peak units in flight (a conversation: one request)
  double generator_cpu_s = 0;           // CPU time of the generator's thread during the run
  int64_t connections_opened = 0;
};

// What a run sends. Units arrive on the schedule; each sends its requests one after another.
// Called only on the run's thread.
class LoadScript {
 public:
  virtual ~LoadScript() = default;
  virtual size_t units() const = 0;
  // Requests in all at most: the size of the record list (slots left unsent are dropped).
  virtual size_t max_requests() const = 0;
  // The next request of `unit` (its index is its record slot, < max_requests(); its body must
  // live until the request ends), or nullopt when the unit is done. `last` is the record of the
  // unit's previous request (null for its first), which the script may annotate.
  virtual std::optional<StreamRequest> Next(size_t unit, RequestRecord* last) = 0;
};

Result<LoadRun> RunScript(const HttpTarget& target, const LoadOptions& options, LoadScript& script);

// Each prepared request is a unit of its own.
Result<LoadRun> RunLoad(const HttpTarget& target, const LoadOptions& options,
                        const std::vector<PreparedRequest>& requests);

}  // namespace pdserve::bench
