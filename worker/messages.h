// What both worker kinds send their gateway after an engine step and when a request fails
// (docs/architecture.md, "Wire protocols"; the StepReport is shared out as "Cost model" says).
// Engine thread only, like the rest of a worker's serving.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model/engine.h"
#include "model/step_log.h"
#include "worker/gateway_link.h"
#include "worker/worker_metrics.h"

namespace pdserve::worker {

// After an engine step: adds its wall time to `*busy_seconds`, records it in `metrics` and
// `step_log` (null: none), and when the step ran sequences, sends its StepReport, each sequence
// named by the gateway's request id (`request_of` of its engine sequence id; 0 for one the gateway
// does not know).
void ReportStep(GatewayLink& link, WorkerMetrics* metrics, model::StepLog* step_log,
                const model::StepStats& stats, const std::function<uint64_t(uint64_t)>& request_of,
                double* busy_seconds);
// After an engine step: counts in `metrics` (null: none) the preemptions since the last call,
// `*reported` being how many the engine had then.
void ReportPreemptions(const model::Engine& engine, WorkerMetrics* metrics, int64_t* reported);
// After an engine step: the engine's prefix cache counters and cached pages into `metrics` (null:
// none).
void ReportPrefixCache(model::Engine& engine, WorkerMetrics* metrics);

// A RequestError for `request_id`: `retryable` when the request did not start (another worker
// may take it), `peer_failed` when a prefill worker's KV peer caused it, `no_room` when a decode
// worker had no free KV pages for it now (retryable, on this worker too, once pages are free).
void SendRequestError(GatewayLink& link, uint64_t request_id, const std::string& message,
                      bool retryable, bool peer_failed = false, bool no_room = false);
// A RequestError saying the decode worker preempted the running request for want of KV pages:
// the gateway resumes it, with the tokens it already has, where there is room.
void SendPreempted(GatewayLink& link, uint64_t request_id);

}  // namespace pdserve::worker
