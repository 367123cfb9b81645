#include "model/capacity_model.h"

#include <algorithm>

namespace pdserve::model {

namespace {
int Or(int value, int fallback) { return value > 0 ? value : fallback; }
}  // namespace

WorkerCapacity PrefillCapacity(const PerformanceProfile& profile, const Workload& workload,
                               const WorkerLimits& limits) {
  WorkerCapacity c;
  const int input = std::max(1, workload.input_tokens);
  const int budget = Or(limits.max_batch_tokens, Or(profile.max_batch_tokens, 2048));
  c.batch = std::max(1, budget / input);
  c.limited_by = "step budget";
  StepShape shape;
  for (int i = 0; i < c.batch; ++i) AddPromptChunk(shape, 0, input);
  c.step_seconds = profile.StepSeconds(shape);
  c.requests_per_second = c.step_seconds > 0 ? c.batch / c.step_seconds : 0;
  return c;
}

WorkerCapacity DecodeCapacity(const PerformanceProfile& profile, const Workload& workload,
                              const WorkerLimits& limits, double tpot_seconds) {
  WorkerCapacity c;
  const int output = std::max(1, workload.output_tokens);
  const int page_size = Or(limits.page_size, profile.page_size);
  const int pages = Or(limits.kv_pages, profile.kv_pages);
  const int per_request = (workload.input_tokens + output + page_size - 1) / std::max(1, page_size);
  const int by_pages = per_request > 0 ? pages / per_request : 0;
  int batch = std::min(by_pages, std::max(1, limits.max_running));
  c.limited_by = by_pages <= limits.max_running ? "kv pages" : "max running";
  auto step = [&](int n) {
    StepShape shape;
    for (int i = 0; i < n; ++i) AddDecodeToken(shape, workload.input_tokens + output / 2);
    return profile.StepSeconds(shape);
  };
  while (batch > 1 && tpot_seconds > 0 && step(batch) > tpot_seconds) {
    --batch;
    c.limited_by = "tpot";
  }
  c.batch = std::max(0, batch);
  if (c.batch == 0) return c;
  c.step_seconds = step(c.batch);
  c.requests_per_second = c.step_seconds > 0 ? c.batch / (output * c.step_seconds) : 0;
  return c;
}

ClusterCapacity PredictCapacity(const PerformanceProfile& profile, const Workload& workload,
                                const WorkerLimits& limits, int prefill_workers, int decode_workers,
                                double tpot_seconds) {
  ClusterCapacity c;
  c.prefill = PrefillCapacity(profile, workload, limits);
  c.decode = DecodeCapacity(profile, workload, limits, tpot_seconds);
  const double prefill = prefill_workers * c.prefill.requests_per_second;
  const double decode = decode_workers * c.decode.requests_per_second;
  c.requests_per_second = std::min(prefill, decode);
  c.bottleneck = prefill <= decode ? "prefill" : "decode";
  return c;
}

}  // namespace pdserve::model
