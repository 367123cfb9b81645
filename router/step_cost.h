// How a worker's step time becomes cost (docs/architecture.md, "Cost model"): each StepReport
// it sends is shared among the attempts in the step (StepShares, router/step_shares.h) and
// charged to those it holds a part of, on the prefill or the decode side (ChargeStep); what it
// charged is its busy time, kept with its billing period (WorkerBillingPeriod), which the ledger
// receives as WorkerPeriodUpdates. Time a step spent on a request the worker holds no part of
// is charged to no attempt and is not busy time, so each worker's charges add up to its busy
// seconds. WorkerRegistry calls these under its lock. Pure or plain state: no locks, no clock
// of their own (the caller passes the time); a WorkerBillingPeriod is owned by one caller at a
// time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

#include "proto/control.pb.h"
#include "router/attempt.h"

namespace pdserve::router {

// A worker's registration period, for the ledger (docs/architecture.md, "Cost model").
struct WorkerPeriodUpdate {
  uint64_t worker_id = 0;
  proto::Register info;
  std::chrono::system_clock::time_point start, last_seen;
  double busy_seconds = 0;  // step time charged to its attempts (ChargeStep)
  bool ended = false;
};

// Whether `step` can be charged: as many token counts and prompt flags as requests, no count
// below zero, and a finite number of seconds >= 0. Others are ignored (and logged) whole.
bool WellFormedStep(const proto::StepReport& step);

// The usage of an attempt that `worker` holds a part of, by request id; null when it holds none.
using HeldAttempt = std::function<AttemptUsage*(uint64_t request_id)>;

// Charges well-formed `step`, reported by `worker`, to the attempts it holds (`held`): each its
// StepShares share, to its prefill side when `worker` is its prefill worker (of a colocated
// attempt, only for the request's prompt work), else to its decode side. Returns the seconds
// charged: the worker's busy time from this step.
double ChargeStep(uint64_t worker, const proto::StepReport& step, const HeldAttempt& held);

// One worker's billing period, from its registration until it leaves.
class WorkerBillingPeriod {
 public:
  // It joined at `joined`; it is paid for from `billed_from` when that is earlier (a burst
  // worker the planner asked for is billed from the ask, its cold start included).
  WorkerBillingPeriod(uint64_t worker_id, proto::Register info,
                      std::chrono::system_clock::time_point joined,
                      std::optional<std::chrono::system_clock::time_point> billed_from);

  void AddBusy(double seconds) { busy_seconds_ += seconds; }
  double busy_seconds() const { return busy_seconds_; }
  std::chrono::system_clock::time_point start() const { return start_; }

  // Whether a running worker's period is due a report at `now`: at most once a second, counted
  // from the last time this said yes (or from joining).
  bool DueForUpdate(std::chrono::system_clock::time_point now);
  // The period as of `now`; `ended`: the worker left.
  WorkerPeriodUpdate Update(std::chrono::system_clock::time_point now, bool ended) const;

 private:
  uint64_t worker_id_;
  proto::Register info_;
  std::chrono::system_clock::time_point start_, last_update_;
  double busy_seconds_ = 0;
};

}  // namespace pdserve::router
