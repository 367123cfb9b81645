// The cost model's arithmetic; see cost_model.h.
#include "ledger/cost_model.h"

#include <algorithm>

namespace pdserve::ledger {

double ComputeCostUsd(double seconds, const WorkerRef& w) {
  return seconds * w.gpu_count * w.price_per_gpu_hour / 3600.0;
}

double EgressCostUsd(int64_t kv_bytes, const WorkerRef& from, const WorkerRef& to,
                     double usd_per_gb) {
  if (from.zone.empty() || to.zone.empty() || from.zone == to.zone) return 0;
  return static_cast<double>(kv_bytes) / 1e9 * usd_per_gb;
}

double ApiTokensCostUsd(int64_t prompt_tokens, int64_t completion_tokens,
                        double input_usd_per_token, double output_usd_per_token) {
  // volatile keeps the compiler from fusing the products and the sum into one multiply-add.
  const volatile double input = static_cast<double>(prompt_tokens) * input_usd_per_token;
  const volatile double output = static_cast<double>(completion_tokens) * output_usd_per_token;
  return input + output;
}

double ApiTokensCostUsd(int64_t prompt_tokens, int64_t cached_prompt_tokens,
                        int64_t completion_tokens, double input_usd_per_token,
                        double cached_input_usd_per_token, double output_usd_per_token) {
  const int64_t cached =
      std::clamp<int64_t>(cached_prompt_tokens, 0, std::max<int64_t>(prompt_tokens, 0));
  if (cached == 0) {
    return ApiTokensCostUsd(prompt_tokens, completion_tokens, input_usd_per_token,
                            output_usd_per_token);
  }
  const volatile double input = static_cast<double>(prompt_tokens - cached) * input_usd_per_token;
  const volatile double cached_input = static_cast<double>(cached) * cached_input_usd_per_token;
  const volatile double output = static_cast<double>(completion_tokens) * output_usd_per_token;
  return input + cached_input + output;
}

}  // namespace pdserve::ledger
