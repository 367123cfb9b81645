// CapacityModel: what a pool of workers with one performance profile can serve of a workload of
// fixed prompt and output lengths, by the profile's step-time model (docs/architecture.md, "The
// capacity layer"). A prefill worker runs as many whole prompts per step as its step budget
// holds; a decode worker runs the largest batch its KV pages and its running limit allow whose
// step time stays within the TPOT objective. Steady state, no queueing: it is the throughput
// bound admission's goodput is measured against, and what the planner sizes pools with. Pure
// functions of their inputs; any thread.
#pragma once

#include <string>

#include "model/performance_profile.h"

namespace pdserve::model {

struct Workload {
  int input_tokens = 0;
  int output_tokens = 0;
};

struct WorkerLimits {
  int kv_pages = 0;          // 0: the profile's
  int page_size = 0;         // 0: the profile's
  int max_batch_tokens = 0;  // 0: the profile's (2048 when it has none)
  int max_running = 256;     // sequences in a decode batch at once
};

struct WorkerCapacity {
  double requests_per_second = 0;
  int batch = 0;            // prompts per prefill step, or sequences per decode step
  double step_seconds = 0;  // of that step (decode: the TPOT at that batch)
  std::string limited_by;   // "step budget", "kv pages", "max running", "tpot"
};

// One prefill worker: whole prompts per step within the step budget.
WorkerCapacity PrefillCapacity(const PerformanceProfile& profile, const Workload& workload,
                               const WorkerLimits& limits);
// One decode worker: the largest batch that fits its pages and running limit and (tpot_seconds
// > 0) steps within that TPOT; an output token per sequence per step, its context the middle of
// its output.
WorkerCapacity DecodeCapacity(const PerformanceProfile& profile, const Workload& workload,
                              const WorkerLimits& limits, double tpot_seconds);

struct ClusterCapacity {
  WorkerCapacity prefill, decode;
  double requests_per_second = 0;  // the smaller of the two pools'
  std::string bottleneck;          // "prefill" or "decode"
};

ClusterCapacity PredictCapacity(const PerformanceProfile& profile, const Workload& workload,
                                const WorkerLimits& limits, int prefill_workers, int decode_workers,
                                double tpot_seconds);

}  // namespace pdserve::model
