// AttemptAccounting: prices each attempt of a request once and records that one figure
// everywhere it goes: the attempt's ledger row, the cost metrics, and (for a completed
// self-hosted attempt) the self-hosted rates that `overflow=cheapest` compares with. The
// client's x-pdserve-cost-usd header and usage.cost_usd carry the value Record returns. Owned by
// one call (its strand); the ledger, metrics and rates it writes to are shared and thread-safe.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "gateway/attempt_upstream.h"
#include "gateway/gateway_metrics.h"
#include "ledger/ledger.h"
#include "ledger/ledger_writer.h"
#include "router/external_upstream.h"
#include "router/self_hosted_rates.h"

namespace pdserve::gateway {

// Who asked and how the call is accounted.
struct CallAccounting {
  std::shared_ptr<ledger::LedgerWriter> ledger;  // null: no ledger
  bool store_text = false;                       // keep prompt and completion text in the ledger
  double egress_usd_per_gb = 0;                  // KV bytes crossing zones
  std::string tenant;                            // from the API key; "" without authentication
  std::map<std::string, std::string> tags;       // x-pdserve-tags
  // Completed self-hosted attempts' compute is recorded here (null: nowhere).
  std::shared_ptr<router::SelfHostedRates> rates;
};

class AttemptAccounting {
 public:
  AttemptAccounting(CallAccounting accounting, std::shared_ptr<GatewayMetrics> metrics)
      : accounting_(std::move(accounting)), metrics_(std::move(metrics)) {}

  const CallAccounting& accounting() const { return accounting_; }
  // Prices `row` (its who, when and what filled in) from what the attempt used, appends it to
  // the ledger, and records its cost; returns the cost in USD. `upstream`: an external
  // attempt's upstream, whose prices it is paid at; null: a self-hosted attempt.
  double Record(ledger::AttemptRow row, const AttemptUse& use,
                const router::UpstreamConfig* upstream);
  // Appends the row of a request that never ran (status refused): no cost, no metrics.
  void RecordUnrun(const ledger::AttemptRow& row);

 private:
  CallAccounting accounting_;
  std::shared_ptr<GatewayMetrics> metrics_;
};

}  // namespace pdserve::gateway
