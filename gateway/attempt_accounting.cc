#include "gateway/attempt_accounting.h"

#include <spdlog/spdlog.h>

#include "gateway/ledger_rows.h"

namespace pdserve::gateway {

double AttemptAccounting::Record(AttemptRow row, const AttemptUse& use,
                                 const router::UpstreamConfig* upstream) {
  if (upstream) {
    PriceExternalRow(*upstream, use.api_prompt_tokens, use.api_completion_tokens, &row);
    metrics_->RecordCost(accounting_.tenant, kApiClass, row.cost_usd);
  } else {
    PriceRow(use.workers, accounting_.egress_usd_per_gb, &row);
    const double prefill_usd = ComputeCostUsd(row.prefill_step_seconds, row.prefill_worker);
    const double decode_usd = ComputeCostUsd(row.decode_step_seconds, row.decode_worker);
    metrics_->RecordCost(accounting_.tenant, row.prefill_worker.capacity_class, prefill_usd);
    metrics_->RecordCost(accounting_.tenant, row.decode_worker.capacity_class, decode_usd);
    if (accounting_.rates && row.status == kStatusOk) {
      const bool prefilled = row.prefill_worker.id != 0, decoded = row.decode_worker.id != 0;
      accounting_.rates->Record(prefilled ? row.prompt_tokens : 0, prefill_usd,
                                decoded ? row.completion_tokens : 0, decode_usd);
    }
  }
  if (accounting_.ledger) {
    if (Status s = accounting_.ledger->Append(row); !s.ok()) {
      spdlog::error("ledger: could not record {} attempt {}: {}", row.request_id, row.attempt,
                    s.ToString());
    }
  }
  return row.cost_usd;
}

}  // namespace pdserve::gateway
