#include "gateway/attempt_accounting.h"

#include <spdlog/spdlog.h>

#include "gateway/ledger_rows.h"

namespace pdserve::gateway {

double AttemptAccounting::Record(ledger::AttemptRow row, const AttemptUse& use,
                                 const router::UpstreamConfig* upstream) {
  if (upstream) {
    PriceExternalRow(*upstream, use.api_prompt_tokens, use.api_cached_prompt_tokens,
                     use.api_completion_tokens, &row);
  } else {
    PriceRow(use.workers, accounting_.egress_usd_per_gb, &row);
  }
  metrics_->RecordCost(accounting_.tenant, row);
  if (!upstream && accounting_.rates && row.status == ledger::AttemptStatus::kOk) {
    const bool prefilled = row.prefill_worker.id != 0, decoded = row.decode_worker.id != 0;
    accounting_.rates->Record(prefilled ? row.prompt_tokens : 0, row.cost.prefill_compute_usd,
                              decoded ? row.completion_tokens : 0, row.cost.decode_compute_usd);
  }
  const double cost = row.cost.total();
  if (accounting_.ledger) accounting_.ledger->Append(std::move(row));  // it logs what fails
  return cost;
}

void AttemptAccounting::RecordUnrun(const ledger::AttemptRow& row) {
  if (accounting_.ledger) accounting_.ledger->Append(row);
}

}  // namespace pdserve::gateway
