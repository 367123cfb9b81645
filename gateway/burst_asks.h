// BurstAsks: when the planner asked for each burst worker that has not registered yet, so that
// the ledger bills a burst worker from the ask, its cold start included, not from its
// registration (docs/architecture.md, "Cost model"). The planner adds an ask per step up and
// withdraws the newest per step down; a burst worker of the pool that registers claims the
// oldest. A worker nobody asked for (started by hand) claims nothing and is billed from its
// registration.
//
// Threads: any (a mutex inside); the planner's timer and the registry's threads share one.
#pragma once

#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "planner/planner.h"

namespace pdserve::gateway {

class BurstAsks {
 public:
  using TimePoint = std::chrono::system_clock::time_point;

  void Asked(planner::Pool pool, TimePoint when);
  // The planner no longer wants the newest worker it asked for (if it has not come).
  void Withdrawn(planner::Pool pool);
  // No more asks outstanding than workers still to come: the oldest beyond go.
  void KeepAtMost(planner::Pool pool, int outstanding);
  // A worker registered with this role and class: when it was asked for, if it was.
  std::optional<TimePoint> Claim(const std::string& role, const std::string& capacity_class);
  int outstanding(planner::Pool pool) const;

 private:
  mutable std::mutex mu_;
  std::map<planner::Pool, std::deque<TimePoint>> asks_;  // oldest first
};

}  // namespace pdserve::gateway
