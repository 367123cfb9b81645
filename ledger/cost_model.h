// The cost model of docs/architecture.md ("Cost model (the ledger)") as pure functions: what a
// worker's GPU time costs, what KV crossing zones costs and what an external API's tokens cost.
// (How one engine step's wall time is shared among its requests is the registry's,
// router/step_shares.h, which charges each attempt its step seconds.) An attempt is priced once,
// by PriceAttempt (attempt_cost.h), from these; the report prices worker periods' uptime with
// ComputeCostUsd. No state: safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "ledger/attempt_labels.h"

namespace pdserve::ledger {

// A worker as its Register described it, copied into each ledger row so a row stays priced
// after the worker is gone.
struct WorkerRef {
  uint64_t id = 0;   // the gateway's id for the worker; 0: no worker (none ran)
  std::string name;  // the worker's name (host:pid or --name)
  std::string role;  // "prefill", "decode" or "both"
  CapacityClass capacity_class = CapacityClass::kNone;
  std::string zone;               // where its KV lives; crossing zones is charged egress
  double price_per_gpu_hour = 0;  // USD
  int gpu_count = 1;
};

// USD for `seconds` of step wall time on a worker: seconds * gpu_count * price_per_gpu_hour /
// 3600. Also the capacity cost of `seconds` of uptime.
double ComputeCostUsd(double seconds, const WorkerRef& w);

// USD for moving `kv_bytes` from the prefill worker to the decode worker: charged only when
// both zones are named and differ.
double EgressCostUsd(int64_t kv_bytes, const WorkerRef& from, const WorkerRef& to,
                     double usd_per_gb);

// USD for tokens at an API's per-token prices: prompt_tokens * input + completion_tokens *
// output, each product rounded, then their sum (no fused multiply-add), so anyone re-pricing the
// tokens in plain double arithmetic gets exactly this.
double ApiTokensCostUsd(int64_t prompt_tokens, int64_t completion_tokens,
                        double input_usd_per_token, double output_usd_per_token);
// The same with `cached_prompt_tokens` of the prompt (clamped to [0, prompt_tokens]) at
// `cached_input_usd_per_token`: (prompt - cached) * input + cached * cached_input + completion *
// output, each product rounded, then summed left to right. With no cached tokens it equals the
// function above.
double ApiTokensCostUsd(int64_t prompt_tokens, int64_t cached_prompt_tokens,
                        int64_t completion_tokens, double input_usd_per_token,
                        double cached_input_usd_per_token, double output_usd_per_token);

}  // namespace pdserve::ledger
