// Attempts and periods as ledger rows; see ledger_rows.h.
#include "gateway/ledger_rows.h"

#include <algorithm>

#include "ledger/cost_model.h"

namespace pdserve::gateway {

double UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

ledger::WorkerRef ToWorkerRef(uint64_t worker_id, const proto::Register& r) {
  ledger::WorkerRef w;
  w.id = worker_id;
  w.name = r.name();
  w.role = r.role();
  // The registry admits only reserved and burst; an empty Register (no worker) has none.
  auto capacity_class = ParseCapacityClass(r.capacity_class());
  w.capacity_class = capacity_class.ok() ? *capacity_class : CapacityClass::kNone;
  w.zone = r.zone();
  w.price_per_gpu_hour = r.price_per_gpu_hour();
  w.gpu_count = r.gpu_count();
  return w;
}

ledger::WorkerPeriod ToWorkerPeriod(const std::string& run_id,
                                    const router::WorkerPeriodUpdate& update) {
  ledger::WorkerPeriod p;
  p.period_id = run_id + "-" + std::to_string(update.worker_id);
  p.worker = ToWorkerRef(update.worker_id, update.info);
  p.start_unix = UnixSeconds(update.start);
  p.end_unix = UnixSeconds(update.last_seen);
  p.busy_seconds = update.busy_seconds;
  return p;
}

void PriceRow(const router::AttemptUsage& usage, double egress_usd_per_gb,
              ledger::AttemptRow* row) {
  row->prefill_worker = ToWorkerRef(usage.prefill_worker, usage.prefill_info);
  row->decode_worker = ToWorkerRef(usage.decode_worker, usage.decode_info);
  row->prefill_step_seconds = usage.prefill_step_seconds;
  row->decode_step_seconds = usage.decode_step_seconds;
  row->kv_bytes = usage.kv_bytes;
  row->placement = usage.placement;
  row->placement_reason = usage.placement_reason;
  row->cost = ledger::PriceAttempt(*row, {.egress_usd_per_gb = egress_usd_per_gb});
}

void PriceExternalRow(const router::UpstreamConfig& upstream, int64_t prompt_tokens,
                      int64_t cached_prompt_tokens, int64_t completion_tokens,
                      ledger::AttemptRow* row) {
  ledger::WorkerRef w;
  w.id = 0;
  w.name = upstream.name;
  w.role = ToString(CapacityClass::kApi);
  w.capacity_class = CapacityClass::kApi;
  w.gpu_count = 0;
  row->prefill_worker = w;
  row->decode_worker = w;
  row->prefill_step_seconds = 0;
  row->decode_step_seconds = 0;
  row->kv_bytes = 0;
  row->placement = "api";
  row->placement_reason = "";
  row->prompt_tokens = prompt_tokens;
  row->cached_prompt_tokens = std::clamp<int64_t>(cached_prompt_tokens, 0, prompt_tokens);
  row->completion_tokens = completion_tokens;
  row->cost = ledger::PriceAttempt(
      *row, {.input_usd_per_token = upstream.input_cost_per_token,
             .output_usd_per_token = upstream.output_cost_per_token,
             .cached_input_usd_per_token = upstream.cached_input_cost_per_token});
}

}  // namespace pdserve::gateway
