// An attempt priced by the cost model; see attempt_cost.h.
#include "ledger/attempt_cost.h"

#include "ledger/cost_model.h"
#include "ledger/ledger.h"

namespace pdserve::ledger {

AttemptCost PriceAttempt(const AttemptRow& row, const AttemptPrices& prices) {
  AttemptCost c;
  c.prefill_compute_usd = ComputeCostUsd(row.prefill_step_seconds, row.prefill_worker);
  c.decode_compute_usd = ComputeCostUsd(row.decode_step_seconds, row.decode_worker);
  c.egress_usd =
      EgressCostUsd(row.kv_bytes, row.prefill_worker, row.decode_worker, prices.egress_usd_per_gb);
  c.api_tokens_usd =
      ApiTokensCostUsd(row.prompt_tokens, row.cached_prompt_tokens, row.completion_tokens,
                       prices.input_usd_per_token,
                       prices.cached_input_usd_per_token.value_or(prices.input_usd_per_token),
                       prices.output_usd_per_token);
  return c;
}

}  // namespace pdserve::ledger
