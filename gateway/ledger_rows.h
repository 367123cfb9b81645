// Turning what the registry knows about workers and attempts into the ledger's rows: a worker's
// Register as a WorkerRef, a registration period as a WorkerPeriod, and an attempt's usage priced
// by the cost model (docs/architecture.md, "Cost model"). Pure functions: any thread. Called by the
// gateway (CompletionCall for attempts, GatewayServer for periods).
#pragma once

#include <cstdint>
#include <string>

#include "ledger/cost_model.h"
#include "ledger/ledger.h"
#include "router/external_upstream.h"
#include "router/worker_registry.h"

namespace pdserve::gateway {

WorkerRef ToWorkerRef(uint64_t worker_id, const proto::Register& r);

// `run_id` tells this gateway run's periods from earlier runs' in the same ledger.
WorkerPeriod ToWorkerPeriod(const std::string& run_id, const WorkerPeriodUpdate& update);

// Fills the row's workers, attributed step seconds, KV bytes, egress and cost from `usage`.
void PriceRow(const AttemptUsage& usage, double egress_usd_per_gb, AttemptRow* row);

// An external attempt's row (class api): its upstream stands as both of the row's workers (id 0:
// none of ours) and its cost is prompt_tokens x the input price + completion_tokens x the output
// price, the tokens given; no step seconds, KV bytes or egress.
void PriceExternalRow(const router::UpstreamConfig& upstream, int64_t prompt_tokens,
                      int64_t completion_tokens, AttemptRow* row);
// USD for those tokens at the upstream's prices (what PriceExternalRow charges): each product
// rounded, then their sum (no fused multiply-add), so a reader recomputes it exactly.
double ExternalCostUsd(const router::UpstreamConfig& upstream, int64_t prompt_tokens,
                       int64_t completion_tokens);

double UnixSeconds(std::chrono::system_clock::time_point t);

}  // namespace pdserve::gateway
