// An attempt's cost by part, priced once: PriceAttempt applies the cost model (cost_model.h) to
// what the attempt used, and that one value is what its ledger row stores, what the gateway's
// metrics and self-hosted rates record, what the client is told (x-pdserve-cost-usd and
// usage.cost_usd are its total()) and what `pdserve report` sums. Nothing prices an attempt
// again. Pure: any thread.
#pragma once

#include <optional>

namespace pdserve::ledger {

struct AttemptRow;

// What an attempt is charged at besides its workers' own GPU-hour prices, which the row's
// WorkerRefs carry.
struct AttemptPrices {
  double egress_usd_per_gb = 0;  // KV moved between workers in different zones
  // An external upstream's per-token prices, for an attempt of class api; 0 for self-hosted.
  double input_usd_per_token = 0, output_usd_per_token = 0;
  // Its price per cached prompt token (the row's cached_prompt_tokens); unset: the input price.
  std::optional<double> cached_input_usd_per_token;
};

struct AttemptCost {
  double prefill_compute_usd = 0;  // prefill step seconds on the prefill worker
  double decode_compute_usd = 0;   // decode step seconds on the decode worker
  double egress_usd = 0;           // KV bytes crossing zones
  double api_tokens_usd = 0;       // prompt and completion tokens at an upstream's prices
  // The attempt's cost: the ledger row's cost_usd and what the client is told.
  double total() const {
    return prefill_compute_usd + decode_compute_usd + egress_usd + api_tokens_usd;
  }
};

// Prices `row`'s use: ComputeCostUsd of its prefill and decode step seconds on its workers,
// EgressCostUsd of its KV bytes between them, ApiTokensCostUsd of its prompt (its cached
// prompt tokens at the cached input price) and completion tokens. A part whose price is not given
// (0) or whose worker has none is 0. Reads the row's workers, step seconds, kv_bytes and tokens
// (cached ones too) only.
AttemptCost PriceAttempt(const AttemptRow& row, const AttemptPrices& prices);

}  // namespace pdserve::ledger
