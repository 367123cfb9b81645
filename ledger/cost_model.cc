// The cost model's arithmetic; see cost_model.h.
#include "ledger/cost_model.h"

namespace pdserve::gateway {

double ComputeCostUsd(double seconds, const WorkerRef& w) {
  return seconds * w.gpu_count * w.price_per_gpu_hour / 3600.0;
}

double EgressCostUsd(int64_t kv_bytes, const WorkerRef& from, const WorkerRef& to,
                     double usd_per_gb) {
  if (from.zone.empty() || to.zone.empty() || from.zone == to.zone) return 0;
  return static_cast<double>(kv_bytes) / 1e9 * usd_per_gb;
}

AttemptCost PriceAttempt(double prefill_step_seconds, const WorkerRef& prefill,
                         double decode_step_seconds, const WorkerRef& decode, double egress_usd) {
  return {ComputeCostUsd(prefill_step_seconds, prefill),
          ComputeCostUsd(decode_step_seconds, decode), egress_usd};
}

}  // namespace pdserve::gateway
