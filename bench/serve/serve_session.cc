#include "bench/serve/serve_session.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "bench/serve/conversation_runner.h"
#include "bench/serve/mooncake_trace.h"

namespace pdserve::bench {

CostSummary ComputeCost(const BenchmarkMetrics& metrics, double duration_s, double gpu_hour_price,
                        int64_t gpus, bool has_slo) {
  CostSummary cost;
  if (gpu_hour_price <= 0 || gpus <= 0) return cost;
  cost.priced = true;
  cost.run_cost_usd = gpu_hour_price * static_cast<double>(gpus) * duration_s / 3600.0;
  auto per = [&](double count, double unit) {
    return count > 0 ? cost.run_cost_usd / count * unit : 0;
  };
  cost.usd_per_request = per(static_cast<double>(metrics.completed), 1);
  if (has_slo) cost.usd_per_good_request = per(static_cast<double>(metrics.good_completed), 1);
  cost.usd_per_1m_output_tokens = per(static_cast<double>(metrics.total_output), 1e6);
  cost.usd_per_1m_total_tokens =
      per(static_cast<double>(metrics.total_input + metrics.total_output), 1e6);
  return cost;
}

Result<std::vector<double>> SweepRates(const ServeConfig& config) {
  if (config.sweep.empty()) return std::vector<double>{config.request_rate};
  if (config.sweep == "saturation") {
    if (!(config.sweep_start_rate > 0) || std::isinf(config.sweep_start_rate)) {
      return InvalidArgument("--sweep-start-rate must be a finite rate > 0");
    }
    return std::vector<double>{config.sweep_start_rate};
  }
  std::vector<double> rates;
  std::string_view text = config.sweep;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string item(text.substr(0, comma));
    char* end = nullptr;
    double rate =
        item == "inf" ? std::numeric_limits<double>::infinity() : std::strtod(item.c_str(), &end);
    if (item != "inf" && (item.empty() || end != item.c_str() + item.size() || !(rate > 0))) {
      return InvalidArgument(
          fmt::format("--sweep: '{}' is not a rate > 0 (use r1,r2,... or saturation)", item));
    }
    rates.push_back(rate);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  if (rates.empty()) return InvalidArgument("--sweep is empty");
  return rates;
}

namespace {

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<int64_t> FixedOutputLen(const ServeConfig& c) {
  if (c.output_len > 0) return c.output_len;
  if (c.sharegpt_output_len > 0) return c.sharegpt_output_len;
  return std::nullopt;
}

Result<std::vector<BenchPrompt>> LoadPrompts(const ServeConfig& c, const TokenCounter& counter) {
  if (c.dataset_name == "random") {
    RandomDatasetOptions options{c.num_prompts, c.random_input_len, c.random_output_len,
                                 c.random_range_ratio, c.seed};
    return SampleRandomPrompts(options, counter);
  }
  if (c.dataset_name == "sharegpt") {
    return LoadShareGptPrompts(c.dataset_path, c.num_prompts, c.seed, FixedOutputLen(c), counter);
  }
  if (c.dataset_name == "jsonl") {
    return LoadJsonlPrompts(c.dataset_path, c.num_prompts, c.random_output_len, counter);
  }
  return InvalidArgument(fmt::format(
      "--dataset-name '{}': use random, sharegpt, jsonl, mooncake or multi-turn", c.dataset_name));
}

Result<std::vector<BenchConversation>> LoadConversations(const ServeConfig& c,
                                                         const TokenCounter& counter) {
  if (c.dataset_name == "multi-turn") {
    if (c.turns < 1) return InvalidArgument("--turns must be >= 1");
    MultiTurnOptions options;
    options.num_conversations =
        c.num_conversations > 0 ? c.num_conversations : (c.num_prompts + c.turns - 1) / c.turns;
    options.turns = c.turns;
    options.system_prompt_len = c.system_prompt_len;
    options.user_turn_len = c.user_turn_len;
    options.output_len = c.output_len > 0 ? c.output_len : c.random_output_len;
    options.seed = c.seed;
    return SampleMultiTurnConversations(options, counter);
  }
  ShareGptTurnsOptions options;
  options.num_conversations = c.num_conversations;
  options.min_requests = c.num_prompts;
  options.max_turns = c.turns;
  options.fixed_output_len = FixedOutputLen(c);
  options.seed = c.seed;
  return LoadShareGptConversations(c.dataset_path, options, counter);
}

// What the runs send: prepared requests (with send times for a trace), or conversations.
struct Workload {
  std::vector<PreparedRequest> requests;
  std::vector<double> send_offsets;
  std::vector<BenchConversation> conversations;
};

Result<Workload> LoadWorkload(const ServeConfig& c, const RequestBodyOptions& body,
                              const TokenCounter& counter) {
  if (c.num_prompts < 1) return InvalidArgument("--num-prompts must be >= 1");
  if (c.dataset_name != "random" && c.dataset_name != "multi-turn" && c.dataset_path.empty()) {
    return InvalidArgument(fmt::format("--dataset-name {} needs --dataset-path", c.dataset_name));
  }
  Workload w;
  if (IsMultiTurn(c)) {
    PDSERVE_ASSIGN_OR_RETURN(w.conversations, LoadConversations(c, counter));
    return w;
  }
  if (c.dataset_name == "mooncake") {
    MooncakeTraceOptions options{c.num_prompts, c.trace_time_scale, FixedOutputLen(c)};
    PDSERVE_ASSIGN_OR_RETURN(std::vector<TraceRequest> trace,
                             LoadMooncakeTrace(c.dataset_path, options, counter));
    std::vector<BenchPrompt> prompts;
    for (TraceRequest& r : trace) {
      prompts.push_back(std::move(r.prompt));
      w.send_offsets.push_back(r.send_offset_s);
    }
    PDSERVE_ASSIGN_OR_RETURN(w.requests, BuildRequests(prompts, body));
    for (size_t i = 0; i < trace.size(); ++i) {
      w.requests[i].ideal_cached_tokens = trace[i].ideal_cached_tokens;
    }
    return w;
  }
  PDSERVE_ASSIGN_OR_RETURN(std::vector<BenchPrompt> prompts, LoadPrompts(c, counter));
  PDSERVE_ASSIGN_OR_RETURN(w.requests, BuildRequests(prompts, body));
  return w;
}

}  // namespace

bool IsMultiTurn(const ServeConfig& config) {
  return config.dataset_name == "multi-turn" ||
         (config.dataset_name == "sharegpt" && config.sharegpt_turns == "all");
}

Result<ServeConfig> ResolveDataset(ServeConfig c) {
  if (c.dataset == "random" || c.dataset == "multi-turn") {
    c.dataset_name = c.dataset;
  } else if (!c.dataset.empty()) {
    c.dataset_path = c.dataset;
    PDSERVE_ASSIGN_OR_RETURN(c.dataset_name, DetectDatasetFormat(c.dataset));
  }
  if (c.sharegpt_turns != "first" && c.sharegpt_turns != "all") {
    return InvalidArgument(
        fmt::format("--sharegpt-turns '{}': use first or all", c.sharegpt_turns));
  }
  if (c.sharegpt_turns == "all" && c.dataset_name != "sharegpt") {
    return InvalidArgument("--sharegpt-turns all needs a ShareGPT dataset");
  }
  if (IsMultiTurn(c) && c.endpoint.find("chat/completions") == std::string::npos) {
    if (c.endpoint != "/v1/completions") {
      return InvalidArgument(fmt::format(
          "multi-turn conversations need a chat completions --endpoint, not '{}'", c.endpoint));
    }
    c.endpoint = "/v1/chat/completions";
  }
  if (c.dataset_name == "mooncake" && !c.sweep.empty()) {
    return InvalidArgument("a Mooncake trace is sent at its timestamps: it takes no --sweep");
  }
  return c;
}

Result<ServeSession> RunServeSession(const ServeConfig& given, const TokenCounter& counter) {
  ServeSession session;
  PDSERVE_ASSIGN_OR_RETURN(ServeConfig config, ResolveDataset(given));
  session.config = config;
  session.date = UtcNow();
  if (config.model.empty()) return InvalidArgument("--model is required");
  if (config.endpoint.empty() || config.endpoint.front() != '/') {
    return InvalidArgument("--endpoint must be a path such as /v1/completions");
  }
  PDSERVE_ASSIGN_OR_RETURN(HttpTarget target, ParseBaseUrl(config.base_url));
  PDSERVE_ASSIGN_OR_RETURN(session.percentiles, ParsePercentiles(config.percentiles));
  PDSERVE_ASSIGN_OR_RETURN(session.slo, ParseGoodput(config.goodput));
  PDSERVE_ASSIGN_OR_RETURN(std::vector<double> rates, SweepRates(config));
  RequestBodyOptions body;
  body.endpoint = config.endpoint;
  body.model = config.model;
  // Random words have no natural end: generate the asked length (vLLM's convention).
  body.ignore_eos = config.ignore_eos || config.dataset_name == "random" ||
                    config.dataset_name == "multi-turn" || config.dataset_name == "mooncake";
  body.extra_body_json = config.extra_body;
  PDSERVE_ASSIGN_OR_RETURN(Workload workload, LoadWorkload(config, body, counter));
  const int64_t planned = IsMultiTurn(config) ? CountTurns(workload.conversations)
                                              : static_cast<int64_t>(workload.requests.size());
  session.token_count_note =
      counter ? "output tokens from the server's usage chunk, else the tokenizer; prompt tokens "
                "from usage, else the tokenizer"
              : "output tokens from the server's usage chunk, else one per streamed chunk; "
                "prompt tokens from usage, else the dataset's count (words for random data, "
                "bytes / 4 otherwise)";

  LoadOptions load;
  load.endpoint = config.endpoint;
  load.burstiness = config.burstiness;
  load.max_concurrency = config.max_concurrency;
  load.seed = config.seed;
  load.send_offsets = workload.send_offsets;
  load.client.request_timeout_s = config.request_timeout_s;
  load.client.tls_verify = config.tls_verify;
  load.client.tls_ca_file = config.tls_ca_file;
  if (const char* key = std::getenv(config.api_key_env.c_str()); key != nullptr) {
    load.client.api_key = key;
  }
  load.output_counter = counter;
  load.show_progress = config.progress;
  bool saturation = config.sweep == "saturation";
  for (size_t step = 0; step < rates.size(); ++step) {
    ServeRun run;
    run.request_rate = rates[step];
    load.request_rate = rates[step];
    load.progress_label =
        std::isinf(rates[step]) ? "rate inf" : fmt::format("rate {:g}", rates[step]);
    std::string rate = std::isinf(rates[step]) ? "inf" : fmt::format("{:g}", rates[step]);
    if (IsMultiTurn(config)) {
      spdlog::info("bench serve: {} conversations ({} turns) at {} conversations/s to {}{}",
                   workload.conversations.size(), planned, rate, config.base_url, config.endpoint);
      PDSERVE_ASSIGN_OR_RETURN(run.load,
                               RunConversations(target, load, body, workload.conversations));
    } else {
      spdlog::info("bench serve: {} requests at {} to {}{}", planned,
                   load.send_offsets.empty() ? rate + " req/s" : "the trace's timestamps",
                   config.base_url, config.endpoint);
      PDSERVE_ASSIGN_OR_RETURN(run.load, RunLoad(target, load, workload.requests));
    }
    run.metrics =
        CalculateMetrics(run.load.records, run.load.duration_s, session.percentiles, session.slo);
    run.cache = CalculatePrefixCacheMetrics(run.load.records);
    run.cost = ComputeCost(run.metrics, run.load.duration_s, config.gpu_hour_price, config.gpus,
                           session.slo.any());
    // Offered and achieved in the same unit: conversations (of their mean turns) or requests.
    double achieved = run.metrics.request_throughput;
    if (IsMultiTurn(config) && planned > 0) {
      achieved *= static_cast<double>(workload.conversations.size()) / static_cast<double>(planned);
    }
    session.runs.push_back(std::move(run));
    if (saturation) {
      bool saturated = achieved < config.saturation_ratio * rates[step];
      if (saturated) {
        spdlog::info("bench serve: saturated at {:g}/s offered ({:.2f} achieved)", rates[step],
                     achieved);
      } else if (static_cast<int64_t>(rates.size()) < config.sweep_max_steps) {
        rates.push_back(rates[step] * 2);
      }
    }
  }
  return session;
}

}  // namespace pdserve::bench
