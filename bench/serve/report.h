// Results of a serving session in the forms people already read: the summary table of
// `vllm bench serve`, its result JSON field names (completed, request_throughput, mean_ttft_ms,
// p99_ttft_ms, ttfts, itls, ...) plus pdserve's extras (failures by reason, cost, the
// generator's own CPU cost), and one CSV row per run. Pure functions: thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench/serve/serve_session.h"
#include "common/status.h"

namespace pdserve::bench {

// One run as vLLM writes it (plus extras). "request_rate" is "inf" for all-at-once.
nlohmann::json RunResultJson(const ServeSession& session, const ServeRun& run);
// A single run: RunResultJson. A sweep: {"date", ..., "runs": [RunResultJson...]}.
nlohmann::json SessionResultJson(const ServeSession& session);

// vLLM's "Serving Benchmark Result" block, plus failures and cost when there are any.
std::string SummaryTable(const ServeSession& session, const ServeRun& run);

// A header line and one row per run.
std::string ResultCsv(const ServeSession& session);

// Writes `contents` to `path` (replacing it), creating parent folders.
Status WriteTextFile(const std::string& path, const std::string& contents);

}  // namespace pdserve::bench

namespace pdserve::bench {

// Writes whichever of the JSON, CSV and HTML paths are not empty.
Status WriteSessionOutputs(const ServeSession& session, const std::string& json_path,
                           const std::string& csv_path, const std::string& html_path);

}  // namespace pdserve::bench
