// Step cost and billing periods; see step_cost.h.
#include "router/step_cost.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "router/step_shares.h"

namespace pdserve::router {

bool WellFormedStep(const proto::StepReport& step) {
  const int n = step.request_ids_size();
  const bool counts_ok =
      std::all_of(step.tokens().begin(), step.tokens().end(), [](int32_t t) { return t >= 0; });
  return step.tokens_size() == n && step.prompt_size() == n && step.seconds() >= 0 &&
         std::isfinite(step.seconds()) && counts_ok;
}

double ChargeStep(uint64_t worker, const proto::StepReport& step, const HeldAttempt& held) {
  const int n = step.request_ids_size();
  const std::vector<double> shares =
      router::StepShares(step.seconds(), {step.tokens().data(), static_cast<size_t>(n)});
  double charged = 0;
  for (int i = 0; i < n; ++i) {
    AttemptUsage* c = held(step.request_ids(i));
    if (!c) continue;
    const bool colocated = c->prefill_worker == c->decode_worker;
    if (worker == c->prefill_worker && (!colocated || step.prompt(i))) {
      c->prefill_step_seconds += shares[i];
    } else {
      c->decode_step_seconds += shares[i];
    }
    charged += shares[i];
  }
  return charged;
}

WorkerBillingPeriod::WorkerBillingPeriod(
    uint64_t worker_id, proto::Register info, std::chrono::system_clock::time_point joined,
    std::optional<std::chrono::system_clock::time_point> billed_from)
    : worker_id_(worker_id),
      info_(std::move(info)),
      start_(billed_from && *billed_from < joined ? *billed_from : joined),
      last_update_(joined) {}

bool WorkerBillingPeriod::DueForUpdate(std::chrono::system_clock::time_point now) {
  if (now - last_update_ < std::chrono::seconds(1)) return false;
  last_update_ = now;
  return true;
}

WorkerPeriodUpdate WorkerBillingPeriod::Update(std::chrono::system_clock::time_point now,
                                               bool ended) const {
  WorkerPeriodUpdate u;
  u.worker_id = worker_id_;
  u.info = info_;
  u.start = start_;
  u.last_seen = now;
  u.busy_seconds = busy_seconds_;
  u.ended = ended;
  return u;
}

}  // namespace pdserve::router
