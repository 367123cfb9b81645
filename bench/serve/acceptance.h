// The acceptance report's one dated JSON: what was measured (a serving sweep, the KV bandwidth
// test), where and on what (acceptance_environment.h, every host of the run), the model FLOPs
// utilisation of each serving run where the model's FLOPs per token and the device's peak are
// known, and, given serving results at 1 and N workers, the scaling efficiency. Scaling
// efficiency is defined for a fixed amount of work: T_k is the time k workers need for it at
// their peak sustained throughput X_k (the best output-token throughput over a run's rates),
// T_k = W / X_k, and
//     efficiency = T_1 / (T_N x N) = X_N / (N x X_1),
// 1.0 for perfectly linear scaling, below 1 for the share lost to routing, KV transfer and
// contention. MFU of a run = (prefill FLOPs per token x input tokens/s + decode FLOPs per token x
// output tokens/s) / the device's peak FLOP/s, the FLOPs per token and the peak from a
// `pdserve bench engine --json` of the served model on the serving device (its GEMM rate on a
// GPU, times the GPUs; its FMA peak on a CPU). Pure functions but the file readers: any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/serve/acceptance_environment.h"
#include "bench/serve/serve_session.h"
#include "common/status.h"

namespace pdserve::bench {

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

// Model FLOPs per token and the device's peak, for MFU.
struct MfuInputs {
  std::string source;  // the bench engine JSON
  double prefill_flops_per_token = 0;
  double decode_flops_per_token = 0;
  double peak_gflops = 0;
  std::string peak_source;  // what the peak is ("FMA peak of 2 threads", ...)
};

// Reads a `pdserve bench engine --json` result. `gpus`: the serving GPUs (a GPU peak is per
// device). `peak_gflops` > 0 replaces the measured peak (a datasheet figure, say).
Result<MfuInputs> ReadMfuInputs(const std::string& path, int64_t gpus, double peak_gflops);
// A run's MFU from its result JSON's token counts and duration.
Result<double> RunMfu(const nlohmann::json& run, const MfuInputs& mfu);

struct AcceptanceInputs {
  EnvironmentInfo env;
  const ServeSession* session = nullptr;  // null: scaling only
  std::optional<ScalingReport> scaling;
  // What `pdserve bench kv --json` wrote, plus "peer"; or {"status": "not_run", "reason"}.
  nlohmann::json kv_bandwidth;
  std::optional<MfuInputs> mfu;
  std::string mfu_unknown_reason;  // when mfu is empty
};

// The dated JSON: everything the report shows. The verdict and comparison are added by the
// caller (acceptance_thresholds.h, acceptance_compare.h).
nlohmann::json AcceptanceJson(const AcceptanceInputs& in);

// What the scaling efficiency means, word for word in the JSON and HTML.
extern const char kScalingDefinition[];

}  // namespace pdserve::bench
