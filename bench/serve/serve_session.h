// A whole `pdserve bench serve` invocation: its configuration (the flags, as a plain struct),
// the workload (prompts, a Mooncake trace's timed prompts, or multi-turn conversations), and one
// load run per request rate (one rate, a list, or doubling up to saturation), each with its
// metrics, prefix-cache figures and cost. Multi-turn workloads (`multi-turn`, ShareGPT with
// `--sharegpt-turns all`) go to /v1/chat/completions, replacing the /v1/completions default, and
// --request-rate counts conversations started per second; a Mooncake trace is sent at its own
// timestamps, so it takes no rate sweep. Thread-safety: RunServeSession blocks the calling
// thread; results are plain values.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "bench/serve/conversation.h"
#include "bench/serve/dataset.h"
#include "bench/serve/load_generator.h"
#include "bench/serve/metrics.h"
#include "bench/serve/prefix_cache_metrics.h"
#include "common/status.h"

namespace pdserve::bench {

struct ServeConfig {
  // Target.
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";    // or /v1/chat/completions
  std::string model;                           // "model" in each body; required
  std::string api_key_env = "OPENAI_API_KEY";  // environment variable holding the key, if set
  std::string label;                           // free text carried into the results
  bool tls_verify = true;                      // https: check certificate and host name
  std::string tls_ca_file;                     // https: CA bundle (PEM); "" = the system's
  // Data.
  std::string dataset_name = "random";  // random, sharegpt, jsonl, mooncake or multi-turn
  std::string dataset_path;             // for sharegpt, jsonl and mooncake
  // --dataset: a name (random, multi-turn) or a file whose format is detected from its content;
  // "" = dataset_name and dataset_path as given. ResolveDataset applies it.
  std::string dataset;
  int64_t num_prompts = 1000;  // requests; multi-turn: turns in all, unless num_conversations
  int64_t random_input_len = 1024;
  int64_t random_output_len = 128;  // also the max_tokens of JSONL prompts that set none
  double random_range_ratio = 0.0;
  int64_t sharegpt_output_len = 0;  // > 0 replaces the second turn's length
  bool ignore_eos = false;          // always on for random data (vLLM's convention)
  std::string extra_body;           // JSON object merged into every request body
  std::string tokenizer_path;       // tokenizer.json, for token counts (noted in results)
  // Multi-turn: conversations; 0 = as many as --num-prompts turns need (rounded up).
  int64_t num_conversations = 0;
  int64_t turns = 6;                 // per conversation; ShareGPT replay: at most this many
  int64_t system_prompt_len = 1024;  // tokens of the shared system prompt; 0 = none
  int64_t user_turn_len = 128;       // tokens per user turn
  // max_tokens of each answer (multi-turn), or of each request (ShareGPT, Mooncake) in place of
  // the recorded length; 0 = --random-output-len for multi-turn, the recorded length otherwise.
  int64_t output_len = 0;
  std::string sharegpt_turns = "first";  // first (vLLM's), or all: replay every human turn
  double trace_time_scale = 1.0;         // Mooncake: send offset = timestamp x scale
  // Load.
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int64_t max_concurrency = 0;  // 0: no limit
  uint64_t seed = 0;
  std::string sweep;              // "" | "r1,r2,..." | "saturation"
  double sweep_start_rate = 1.0;  // saturation sweep: first rate, doubled each step
  int64_t sweep_max_steps = 8;    // saturation sweep: at most this many rates
  double saturation_ratio = 0.9;  // saturated when achieved < ratio x offered request rate
  double request_timeout_s = 600;
  // Metrics.
  std::string percentiles = "99";    // --metric-percentiles
  std::vector<std::string> goodput;  // "ttft:MS" "tpot:MS" "e2el:MS"
  // Cost.
  double gpu_hour_price = 0;  // USD per GPU-hour of the serving side; 0: not priced
  int64_t gpus = 1;
  // Output.
  bool save_detailed = false;  // also generated_texts in the JSON
  bool progress = false;       // draw progress on stderr
};

// The serving side's cost over one run: price x GPUs x the run's duration. At rates below
// saturation this charges idle capacity to the requests, as a rented cluster bills.
struct CostSummary {
  bool priced = false;
  double run_cost_usd = 0;
  double usd_per_request = 0;       // per successful request
  double usd_per_good_request = 0;  // per request meeting the goodput SLOs (when given)
  double usd_per_1m_output_tokens = 0;
  double usd_per_1m_total_tokens = 0;
};

CostSummary ComputeCost(const BenchmarkMetrics& metrics, double duration_s, double gpu_hour_price,
                        int64_t gpus, bool has_slo);

struct ServeRun {
  double request_rate = 0;  // offered; +inf for all at once
  LoadRun load;
  BenchmarkMetrics metrics;
  PrefixCacheMetrics cache;
  CostSummary cost;
};

struct ServeSession {
  ServeConfig config;
  std::string date;  // UTC, ISO 8601, when the session started
  std::vector<double> percentiles;
  GoodputSlo slo;
  std::string token_count_note;  // how prompt and output tokens were counted
  std::vector<ServeRun> runs;
};

// The rates a sweep runs, or the single --request-rate. "saturation" yields only its first rate;
// RunServeSession doubles it while the server keeps up.
Result<std::vector<double>> SweepRates(const ServeConfig& config);

// Applies --dataset (a name, or a file: its format detected) and, for multi-turn workloads, the
// chat endpoint. InvalidArgument for a bad combination; the detection's errors name the file.
Result<ServeConfig> ResolveDataset(ServeConfig config);

// True for workloads sent as conversations (conversation_runner.h).
bool IsMultiTurn(const ServeConfig& config);

// Loads the data, then runs every rate. `counter` counts tokens (a tokenizer) or is null.
Result<ServeSession> RunServeSession(const ServeConfig& given, const TokenCounter& counter);

}  // namespace pdserve::bench
