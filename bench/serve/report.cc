#include "bench/serve/report.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>

#include "bench/serve/html_report.h"
#include "common/json_text.h"

namespace pdserve::bench {

using nlohmann::json;

namespace {

struct NamedStats {
  const char* name;   // as in vLLM's field names
  const char* title;  // as in vLLM's table
  const char* abbrev;
  const LatencyStats* stats;
};

std::vector<NamedStats> AllStats(const BenchmarkMetrics& m) {
  return {{"ttft", "Time to First Token", "TTFT", &m.ttft},
          {"tpot", "Time per Output Token (excl. 1st token)", "TPOT", &m.tpot},
          {"itl", "Inter-token Latency", "ITL", &m.itl},
          {"e2el", "End-to-end Latency", "E2EL", &m.e2el}};
}

json RateJson(double rate) { return std::isinf(rate) ? json("inf") : json(rate); }

json CostJson(const CostSummary& c) {
  if (!c.priced) return nullptr;
  return {{"run_cost_usd", c.run_cost_usd},
          {"usd_per_request", c.usd_per_request},
          {"usd_per_good_request", c.usd_per_good_request},
          {"usd_per_1m_output_tokens", c.usd_per_1m_output_tokens},
          {"usd_per_1m_total_tokens", c.usd_per_1m_total_tokens}};
}

// The server's cached share beside the ideal (prefix_cache_metrics.h); nulls where not known.
json PrefixCacheJson(const PrefixCacheMetrics& c) {
  auto known = [](bool is_known, auto value) { return is_known ? json(value) : json(nullptr); };
  json j = {{"reporting_requests", c.reporting_requests},
            {"cached_prompt_tokens", known(c.reported(), c.cached_tokens)},
            {"cached_share", known(c.reported(), c.cached_share)},
            {"cached_above_prompt", c.cached_above_prompt},
            {"ideal_cached_prompt_tokens", known(c.ideal_known(), c.ideal_cached_tokens)},
            {"ideal_cached_share", known(c.ideal_known(), c.ideal_cached_share)},
            {"share_of_ideal", known(c.reported() && c.ideal_known(), c.share_of_ideal)}};
  if (c.multi_turn) {
    j["median_ttft_ms_by_turn"] = c.median_ttft_ms_by_turn;
    j["median_ttft_ms_first_turn"] = c.median_ttft_ms_first_turn;
    j["median_ttft_ms_later_turns"] = c.median_ttft_ms_later_turns;
  }
  return j;
}

void AppendPrefixCacheLines(const ServeRun& run,
                            const std::function<void(std::string_view, const std::string&)>& line) {
  const PrefixCacheMetrics& c = run.cache;
  auto f2 = [](double v) { return fmt::format("{:.2f}", v); };
  auto f3 = [](double v) { return fmt::format("{:.3f}", v); };
  line("Cached prompt tokens:",
       c.reported() ? std::to_string(c.cached_tokens) : std::string("not reported"));
  if (c.reported()) line("Cached share of prompt tokens:", f3(c.cached_share));
  if (c.ideal_known()) line("Ideal cached share (unbounded cache):", f3(c.ideal_cached_share));
  if (c.reported() && c.ideal_known()) line("Cached share / ideal:", f3(c.share_of_ideal));
  if (c.cached_above_prompt > 0) {
    line("Requests with cached > prompt tokens:", std::to_string(c.cached_above_prompt));
  }
  if (c.multi_turn) {
    line("Median TTFT, turn 1 (ms):", f2(c.median_ttft_ms_first_turn));
    line("Median TTFT, turns 2+ (ms):", f2(c.median_ttft_ms_later_turns));
  }
  if (run.load.requests_not_sent > 0) {
    line("Turns not sent (a turn before failed):", std::to_string(run.load.requests_not_sent));
  }
}

}  // namespace

json RunResultJson(const ServeSession& session, const ServeRun& run) {
  const ServeConfig& c = session.config;
  const BenchmarkMetrics& m = run.metrics;
  bool chat = c.endpoint.find("chat") != std::string::npos;
  json j = {
      {"date", session.date},
      {"backend", chat ? "openai-chat" : "openai"},
      {"endpoint_type", chat ? "openai-chat" : "openai"},
      {"base_url", c.base_url},
      {"endpoint", c.endpoint},
      {"label", c.label},
      {"model_id", c.model},
      {"tokenizer_id", c.tokenizer_path.empty() ? json(nullptr) : json(c.tokenizer_path)},
      {"dataset_name", c.dataset_name},
      {"dataset_path", c.dataset_path.empty() ? json(nullptr) : json(c.dataset_path)},
      {"num_prompts", c.num_prompts},
      {"request_rate", RateJson(run.request_rate)},
      {"burstiness", c.burstiness},
      {"max_concurrency", c.max_concurrency > 0 ? json(c.max_concurrency) : json(nullptr)},
      {"duration", run.load.duration_s},
      {"completed", m.completed},
      {"failed", m.failed},
      {"total_input_tokens", m.total_input},
      {"total_output_tokens", m.total_output},
      {"request_throughput", m.request_throughput},
      {"request_goodput", session.slo.any() ? json(m.request_goodput) : json(nullptr)},
      {"output_throughput", m.output_throughput},
      {"total_token_throughput", m.total_token_throughput},
      {"max_output_tokens_per_s", m.max_output_tokens_per_s},
      {"max_concurrent_requests", run.load.max_concurrent_requests},
  };
  for (const NamedStats& s : AllStats(m)) {
    j[fmt::format("mean_{}_ms", s.name)] = s.stats->mean_ms;
    j[fmt::format("median_{}_ms", s.name)] = s.stats->median_ms;
    j[fmt::format("std_{}_ms", s.name)] = s.stats->std_ms;
    for (const auto& [p, v] : s.stats->percentiles_ms) {
      j[fmt::format("p{}_{}_ms", PercentileLabel(p), s.name)] = v;
    }
  }
  json input_lens = json::array(), output_lens = json::array(), ttfts = json::array(),
       itls = json::array(), errors = json::array(), texts = json::array(),
       statuses = json::array(), retry_afters = json::array(), latencies = json::array(),
       start_times = json::array(), cached = json::array(), conversations = json::array(),
       turns = json::array();
  json sources = json::object();
  for (const RequestRecord& r : run.load.records) {
    cached.push_back(r.cached_tokens >= 0 ? json(r.cached_tokens) : json(nullptr));
    conversations.push_back(r.conversation);
    turns.push_back(r.turn);
    input_lens.push_back(r.prompt_tokens);
    output_lens.push_back(r.success ? r.output_tokens : 0);
    ttfts.push_back(r.success ? r.ttft_s : 0.0);
    itls.push_back(r.itl_s);
    errors.push_back(r.error);
    statuses.push_back(r.http_status);
    retry_afters.push_back(r.retry_after_s);
    latencies.push_back(r.latency_s);
    start_times.push_back(r.start_s);
    if (c.save_detailed) texts.push_back(r.generated_text);
    if (r.success) {
      std::string key(TokenCountSourceName(r.output_token_source));
      sources[key] = sources.value(key, 0) + 1;
    }
  }
  j["input_lens"] = std::move(input_lens);
  j["output_lens"] = std::move(output_lens);
  j["ttfts"] = std::move(ttfts);
  j["itls"] = std::move(itls);
  j["errors"] = std::move(errors);
  // pdserve's extras per request: the HTTP status (0: none read), Retry-After (-1: none), the
  // seconds from sending to the end, failed or not, and when it was sent (seconds after the run
  // began: a timeline of TTFT under changing load).
  j["http_statuses"] = std::move(statuses);
  j["retry_after_s"] = std::move(retry_afters);
  j["latencies"] = std::move(latencies);
  j["start_times"] = std::move(start_times);
  if (c.save_detailed) j["generated_texts"] = std::move(texts);
  // Per request: the server's cached_tokens (null: not reported); multi-turn: the conversation
  // and turn (0-based) of each request, in send order within a conversation.
  j["cached_tokens"] = std::move(cached);
  if (run.cache.multi_turn) {
    j["conversation_ids"] = std::move(conversations);
    j["turn_indices"] = std::move(turns);
    j["requests_not_sent"] = run.load.requests_not_sent;
  }
  j["prefix_cache"] = PrefixCacheJson(run.cache);
  // pdserve's extras.
  j["failures_by_reason"] = m.failures_by_reason;
  json slo = json::object();
  if (session.slo.ttft_ms) slo["ttft"] = *session.slo.ttft_ms;
  if (session.slo.tpot_ms) slo["tpot"] = *session.slo.tpot_ms;
  if (session.slo.e2el_ms) slo["e2el"] = *session.slo.e2el_ms;
  j["goodput_slo_ms"] = slo;
  j["good_completed"] = m.good_completed;
  j["output_token_sources"] = sources;
  j["token_count_note"] = session.token_count_note;
  j["gpu_hour_price"] = c.gpu_hour_price;
  j["gpus"] = c.gpus;
  j["cost"] = CostJson(run.cost);
  int64_t sent = static_cast<int64_t>(run.load.records.size());
  j["generator"] = {{"cpu_s", run.load.generator_cpu_s},
                    {"cpu_us_per_request", sent > 0 ? run.load.generator_cpu_s * 1e6 / sent : 0.0},
                    {"connections_opened", run.load.connections_opened}};
  return j;
}

json SessionResultJson(const ServeSession& session) {
  if (session.runs.size() == 1) return RunResultJson(session, session.runs[0]);
  json runs = json::array();
  for (const ServeRun& run : session.runs) runs.push_back(RunResultJson(session, run));
  return {{"date", session.date},
          {"label", session.config.label},
          {"model_id", session.config.model},
          {"base_url", session.config.base_url},
          {"sweep", session.config.sweep},
          {"runs", std::move(runs)}};
}

std::string SummaryTable(const ServeSession& session, const ServeRun& run) {
  const BenchmarkMetrics& m = run.metrics;
  std::string out;
  auto line = [&](std::string_view name, const std::string& value) {
    out += fmt::format("{:<40} {:<10}\n", name, value);
  };
  auto f2 = [](double v) { return fmt::format("{:.2f}", v); };
  auto rule = [&](std::string_view title, char fill) {
    size_t pad = title.size() < 50 ? 50 - title.size() : 0;  // centred as Python's {:c^50}
    out +=
        std::string(pad / 2, fill) + std::string(title) + std::string(pad - pad / 2, fill) + "\n";
  };
  rule(" Serving Benchmark Result ", '=');
  line("Successful requests:", std::to_string(m.completed));
  line("Failed requests:", std::to_string(m.failed));
  line("Request rate configured (RPS):",
       std::isinf(run.request_rate) ? "inf" : f2(run.request_rate));
  if (session.config.max_concurrency > 0) {
    line("Maximum request concurrency:", std::to_string(session.config.max_concurrency));
  }
  line("Benchmark duration (s):", f2(run.load.duration_s));
  line("Total input tokens:", std::to_string(m.total_input));
  line("Total generated tokens:", std::to_string(m.total_output));
  line("Request throughput (req/s):", f2(m.request_throughput));
  if (session.slo.any()) line("Request goodput (req/s):", f2(m.request_goodput));
  line("Output token throughput (tok/s):", f2(m.output_throughput));
  line("Peak output token throughput (tok/s):", f2(m.max_output_tokens_per_s));
  line("Peak concurrent requests:", std::to_string(run.load.max_concurrent_requests));
  line("Total Token throughput (tok/s):", f2(m.total_token_throughput));
  for (const NamedStats& s : AllStats(m)) {
    rule(s.title, '-');
    line(fmt::format("Mean {} (ms):", s.abbrev), f2(s.stats->mean_ms));
    line(fmt::format("Median {} (ms):", s.abbrev), f2(s.stats->median_ms));
    line(fmt::format("Std {} (ms):", s.abbrev), f2(s.stats->std_ms));
    for (const auto& [p, v] : s.stats->percentiles_ms) {
      line(fmt::format("P{} {} (ms):", PercentileLabel(p), s.abbrev), f2(v));
    }
  }
  if (!m.failures_by_reason.empty()) {
    rule("Failures", '-');
    for (const auto& [reason, count] : m.failures_by_reason) {
      line(fmt::format("{}:", reason), std::to_string(count));
    }
    for (const RequestRecord& r : run.load.records) {
      if (!r.success) {
        out += fmt::format("first error: {}\n", r.error.substr(0, 200));
        break;
      }
    }
  }
  if (run.cache.reported() || run.cache.ideal_known() || run.cache.multi_turn) {
    rule("Prefix Cache", '-');
    AppendPrefixCacheLines(run, line);
  }
  if (run.cost.priced) {
    rule("Cost", '-');
    line("Run cost (USD):", fmt::format("{:.4f}", run.cost.run_cost_usd));
    line("Cost per request (USD):", fmt::format("{:.6f}", run.cost.usd_per_request));
    if (session.slo.any()) {
      line("Cost per good request (USD):", fmt::format("{:.6f}", run.cost.usd_per_good_request));
    }
    line("Cost per 1M output tokens (USD):", f2(run.cost.usd_per_1m_output_tokens));
    line("Cost per 1M total tokens (USD):", f2(run.cost.usd_per_1m_total_tokens));
  }
  rule("Load generator", '-');
  int64_t sent = static_cast<int64_t>(run.load.records.size());
  line("Generator CPU per request (us):",
       f2(sent > 0 ? run.load.generator_cpu_s * 1e6 / sent : 0.0));
  out += std::string(50, '=') + "\n";
  return out;
}

std::string ResultCsv(const ServeSession& session) {
  std::vector<std::string> header = {"date",
                                     "label",
                                     "model_id",
                                     "request_rate",
                                     "burstiness",
                                     "max_concurrency",
                                     "num_prompts",
                                     "completed",
                                     "failed",
                                     "duration",
                                     "request_throughput",
                                     "request_goodput",
                                     "output_throughput",
                                     "total_token_throughput",
                                     "max_output_tokens_per_s"};
  if (session.runs.empty()) return "";
  for (const NamedStats& s : AllStats(session.runs[0].metrics)) {
    for (const char* stat : {"mean", "median", "std"}) {
      header.push_back(fmt::format("{}_{}_ms", stat, s.name));
    }
    for (double p : session.percentiles) {
      header.push_back(fmt::format("p{}_{}_ms", PercentileLabel(p), s.name));
    }
  }
  for (const char* c : {"run_cost_usd", "usd_per_request", "usd_per_1m_output_tokens",
                        "usd_per_1m_total_tokens", "generator_cpu_us_per_request", "cached_share",
                        "ideal_cached_share", "median_ttft_ms_later_turns"}) {
    header.push_back(c);
  }
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  std::string out = fmt::format("{}\n", fmt::join(header, ","));
  for (const ServeRun& run : session.runs) {
    const BenchmarkMetrics& m = run.metrics;
    std::vector<std::string> row = {
        session.date,
        quote(session.config.label),
        quote(session.config.model),
        std::isinf(run.request_rate) ? "inf" : fmt::format("{}", run.request_rate),
        fmt::format("{}", session.config.burstiness),
        fmt::format("{}", session.config.max_concurrency),
        fmt::format("{}", session.config.num_prompts),
        fmt::format("{}", m.completed),
        fmt::format("{}", m.failed),
        fmt::format("{}", run.load.duration_s),
        fmt::format("{}", m.request_throughput),
        session.slo.any() ? fmt::format("{}", m.request_goodput) : "",
        fmt::format("{}", m.output_throughput),
        fmt::format("{}", m.total_token_throughput),
        fmt::format("{}", m.max_output_tokens_per_s)};
    for (const NamedStats& s : AllStats(m)) {
      row.push_back(fmt::format("{}", s.stats->mean_ms));
      row.push_back(fmt::format("{}", s.stats->median_ms));
      row.push_back(fmt::format("{}", s.stats->std_ms));
      for (const auto& [p, v] : s.stats->percentiles_ms) row.push_back(fmt::format("{}", v));
    }
    auto priced = [&](double v) { return run.cost.priced ? fmt::format("{}", v) : ""; };
    row.push_back(priced(run.cost.run_cost_usd));
    row.push_back(priced(run.cost.usd_per_request));
    row.push_back(priced(run.cost.usd_per_1m_output_tokens));
    row.push_back(priced(run.cost.usd_per_1m_total_tokens));
    size_t sent = run.load.records.size();
    row.push_back(fmt::format("{}", sent ? run.load.generator_cpu_s * 1e6 / sent : 0.0));
    const PrefixCacheMetrics& cache = run.cache;
    row.push_back(cache.reported() ? fmt::format("{}", cache.cached_share) : "");
    row.push_back(cache.ideal_known() ? fmt::format("{}", cache.ideal_cached_share) : "");
    row.push_back(cache.multi_turn ? fmt::format("{}", cache.median_ttft_ms_later_turns) : "");
    out += fmt::format("{}\n", fmt::join(row, ","));
  }
  return out;
}

Status WriteTextFile(const std::string& path, const std::string& contents) {
  std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Unavailable(fmt::format("cannot write '{}'", path));
  out << contents;
  out.close();
  if (!out) return DataLoss(fmt::format("writing '{}' failed", path));
  return Status::Ok();
}

Status WriteSessionOutputs(const ServeSession& session, const std::string& json_path,
                           const std::string& csv_path, const std::string& html_path) {
  if (!json_path.empty()) {
    PDSERVE_RETURN_IF_ERROR(
        WriteTextFile(json_path, DumpJson(SessionResultJson(session), 2) + "\n"));
  }
  if (!csv_path.empty()) PDSERVE_RETURN_IF_ERROR(WriteTextFile(csv_path, ResultCsv(session)));
  if (!html_path.empty()) {
    PDSERVE_RETURN_IF_ERROR(
        WriteTextFile(html_path, HtmlReport("pdserve bench serve", session, {})));
  }
  return Status::Ok();
}

}  // namespace pdserve::bench
