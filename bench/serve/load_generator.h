// Runs one serving benchmark: sends prepared requests to an OpenAI-compatible endpoint on the
// arrival schedule of arrivals.h, at most max_concurrency in flight (later arrivals wait their
// turn, as behind vLLM's semaphore), and collects one RequestRecord per request. Everything runs
// on one io_context on the calling thread. Thread-safety: RunLoad may be called from any thread;
// calls share nothing.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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
};

// Bodies with "stream": true and "stream_options": {"include_usage": true}; max_tokens
// (completions) or max_completion_tokens (chat), as vLLM sends them.
Result<std::vector<PreparedRequest>> BuildRequests(const std::vector<BenchPrompt>& prompts,
                                                   const RequestBodyOptions& options);

struct LoadOptions {
  std::string endpoint = "/v1/completions";
  double request_rate = std::numeric_limits<double>::infinity();  // requests/s; inf: all at once
  double burstiness = 1.0;      // gamma shape of the gaps; 1 = Poisson
  int64_t max_concurrency = 0;  // requests in flight at most; 0 = no limit
  uint64_t seed = 0;            // of the arrival schedule
  StreamingClientOptions client;
  TokenCounter output_counter;  // counts output tokens when the server sends no usage
  bool show_progress = false;   // a progress line on stderr (callers pass isatty(2))
  std::string progress_label;   // printed before the bar
};

struct LoadRun {
  std::vector<RequestRecord> records;   // in request order
  double duration_s = 0;                // first send to last completion (vLLM's duration)
  int64_t max_concurrent_requests = 0;  // peak in flight
  double generator_cpu_s = 0;           // CPU time of the generator's thread during the run
  int64_t connections_opened = 0;
};

Result<LoadRun> RunLoad(const HttpTarget& target, const LoadOptions& options,
                        const std::vector<PreparedRequest>& requests);

}  // namespace pdserve::bench
