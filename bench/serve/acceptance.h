// The acceptance report for a rented cluster: what was measured (a serving sweep), where and on
// what (provider and region labels, host, node id, GPUs, driver, CUDA, NCCL, pdserve version),
// the KV bandwidth test's status, and, given serving results at 1 and N workers, the scaling
// efficiency. Scaling efficiency is defined for a fixed amount of work: T_k is the time k
// workers need for it at their peak sustained throughput X_k (the best output-token throughput
// over a run's rates), T_k = W / X_k, and
//     efficiency = T_1 / (T_N x N) = X_N / (N x X_1),
// 1.0 for perfectly linear scaling, below 1 for the share lost to routing, KV transfer and
// contention. Functions that probe the host run external commands (nvidia-smi, ldconfig) and
// read files; they are safe to call from any thread but slow (up to seconds).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/serve/html_report.h"
#include "bench/serve/serve_session.h"
#include "common/status.h"

namespace pdserve::bench {

// "none" for anything that cannot be read (no GPU, no nvidia-smi, no NCCL).
struct EnvironmentInfo {
  std::string date;  // UTC, ISO 8601
  std::string provider;
  std::string region;
  std::string hostname;
  std::string node_id;  // /etc/machine-id
  std::string os;       // uname: system release machine
  std::string gpu_model;
  int64_t gpu_count = 0;
  std::string driver_version;
  std::string cuda_version;  // the driver's CUDA version (nvidia-smi)
  std::string nccl_version;  // $NCCL_VERSION, else the libnccl.so.2.x.y that ldconfig knows
  std::string pdserve_version;
};

EnvironmentInfo ProbeEnvironment(const std::string& provider, const std::string& region,
                                 const std::string& pdserve_version);

// Parsers of the probed commands' output, exposed for tests.
// `nvidia-smi --query-gpu=name,driver_version --format=csv,noheader` -> model, count, driver.
void ParseNvidiaSmiQuery(std::string_view csv, EnvironmentInfo& info);
// "CUDA Version: 12.4" in nvidia-smi's banner, else "none".
std::string ParseCudaVersion(std::string_view banner);
// "2.21.5" from a path ending in libnccl.so.2.21.5, else "none".
std::string NcclVersionFromLibraryPath(std::string_view path);

struct ScalingPoint {
  std::string path;
  int64_t workers = 1;
  double peak_output_throughput = 0;   // tokens/s, best over the file's runs
  double peak_request_throughput = 0;  // req/s, best over the file's runs
};

// Reads a `bench serve` result JSON (one run or a sweep) or an acceptance JSON.
Result<ScalingPoint> ReadScalingPoint(const std::string& path, int64_t workers);

struct ScalingReport {
  ScalingPoint one, many;
  double efficiency = 0;                     // on output-token throughput (the definition above)
  double efficiency_request_throughput = 0;  // the same on requests per second
};

Result<ScalingReport> ComputeScaling(const ScalingPoint& one, const ScalingPoint& many);

// The one dated JSON of an acceptance run. `session` may be null (scaling only).
extern const char kKvBandwidthNotRunReason[];

// kv_bandwidth: the JSON `pdserve bench kv --json` wrote, or null when it was not run (then
// kv_not_run_reason says why).
nlohmann::json AcceptanceJson(const EnvironmentInfo& env, const ServeSession* session,
                              const std::optional<ScalingReport>& scaling,
                              const nlohmann::json& kv_bandwidth = nullptr,
                              const std::string& kv_not_run_reason = kKvBandwidthNotRunReason);
// Environment, KV bandwidth and scaling as sections for HtmlReport.
std::vector<HtmlSection> AcceptanceSections(const EnvironmentInfo& env,
                                            const std::optional<ScalingReport>& scaling);

// What the scaling efficiency means, word for word in the JSON and HTML.
extern const char kScalingDefinition[];
// Why the KV bandwidth test is recorded as not run.

}  // namespace pdserve::bench
