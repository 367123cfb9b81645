// The measurement behind `pdserve bench engine --profile-out FILE`: runs a worker's engine (the
// worker's page size, step budget and KV pool) over a sweep of step shapes, prompt-only steps of
// several lengths and decode steps at several batch sizes and contexts, records each step's
// wall time and work (StepStats), and fits the performance profile's step-time model
// (model/performance_profile.h) to them. Also times the engine's start (the cold start). Runs
// on the calling thread and takes the machine (or device) while it runs.
#pragma once

#include <string>
#include <vector>

#include "bench/engine/engine_bench.h"
#include "common/status.h"
#include "model/performance_profile.h"

namespace pdserve::bench {

struct ProfileSweepOptions {
  // Device, dtype, threads and random_shape as for the engine benchmark.
  EngineBenchOptions engine;
  int page_size = 16;
  int max_batch_tokens = 2048;  // the workers' default step budget
  int64_t kv_memory_mb = 512;   // the workers' default pool, for the profile's pages
  std::vector<int> prompt_lens = {16, 32, 64, 128, 256, 512, 1024, 2048};
  std::vector<int> batches = {1, 2, 4, 8, 16, 32, 64};
  std::vector<int> contexts = {32, 256, 1024};
  int decode_steps = 6;  // timed decode steps per (batch, context)
  int repeats = 3;
  // The KV link between a prefill and a decode worker, measured elsewhere (pdserve bench kv);
  // 0: transfers take no time.
  double kv_gbps = 0;
  std::string kv_gbps_source;
  std::string command;  // what produced the profile, recorded in it
};

Result<model::PerformanceProfile> MeasureProfile(const std::string& model_dir,
                                                 const ProfileSweepOptions& options);

// The profile's fit and range as a short table.
std::string ProfileSummary(const model::PerformanceProfile& profile);

}  // namespace pdserve::bench
