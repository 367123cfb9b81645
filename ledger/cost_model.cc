// The cost model's arithmetic; see cost_model.h.
#include "ledger/cost_model.h"

#include <numeric>

namespace pdserve::gateway {

double ComputeCostUsd(double seconds, const WorkerRef& w) {
  return seconds * w.gpu_count * w.price_per_gpu_hour / 3600.0;
}

std::vector<double> PrefillStepShares(double step_seconds, const std::vector<int64_t>& tokens) {
  std::vector<double> shares(tokens.size(), 0.0);
  if (tokens.empty()) return shares;
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  for (size_t i = 0; i < tokens.size(); ++i) {
    shares[i] = total > 0 ? step_seconds * static_cast<double>(tokens[i]) / total
                          : step_seconds / static_cast<double>(tokens.size());
  }
  return shares;
}

double DecodeStepShare(double step_seconds, int batch_size) {
  return batch_size > 0 ? step_seconds / batch_size : 0.0;
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
