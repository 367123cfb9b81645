// Turning what the registry knows about workers and attempts into the ledger's rows: a worker's
// Register as a WorkerRef, a registration period as a WorkerPeriod, and an attempt's usage as a
// row priced once by PriceAttempt (ledger/attempt_cost.h; docs/architecture.md, "Cost model"):
// the row's AttemptCost is then what the ledger, the metrics, the self-hosted rates and the
// client get. Pure functions: any thread. Called by the gateway (CompletionCall for attempts,
// GatewayServer for periods).
#pragma once

#include <cstdint>
#include <string>

#include "ledger/attempt_cost.h"
#include "ledger/ledger.h"
#include "router/external_upstream.h"
#include "router/worker_registry.h"

namespace pdserve::gateway {

ledger::WorkerRef ToWorkerRef(uint64_t worker_id, const proto::Register& r);

// `run_id` tells this gateway run's periods from earlier runs' in the same ledger.
ledger::WorkerPeriod ToWorkerPeriod(const std::string& run_id,
                                    const router::WorkerPeriodUpdate& update);

// Fills the row's workers, attributed step seconds and KV bytes from `usage`, and its cost:
// their compute and the KV's egress at `egress_usd_per_gb` (PriceAttempt).
void PriceRow(const router::AttemptUsage& usage, double egress_usd_per_gb, ledger::AttemptRow* row);

// An external attempt's row (class api): its upstream stands as both of the row's workers (id 0:
// none of ours), the tokens given are its tokens and its cost is theirs at the upstream's prices
// (PriceAttempt: api_tokens_usd, the only part; `cached_prompt_tokens` of the prompt, clamped
// to it, at the upstream's cached-input price); no step seconds, KV bytes or egress.
void PriceExternalRow(const router::UpstreamConfig& upstream, int64_t prompt_tokens,
                      int64_t cached_prompt_tokens, int64_t completion_tokens,
                      ledger::AttemptRow* row);
double UnixSeconds(std::chrono::system_clock::time_point t);

}  // namespace pdserve::gateway
