// BurstAsks: when the planner asked for each burst worker that has not registered yet, so that
// the ledger bills a burst worker from the ask, its cold start included, not from its
// registration (docs/architecture.md, "Cost model"). The planner adds an ask per step up and
// withdraws the newest per step down; a burst worker of the pool that registers claims the
// oldest. A worker nobody asked for (started by hand) claims nothing and is billed from its
// registration.
//
// It also says when the next burst worker of a pool should arrive: its ask plus the pool's cold
// start, the median of the last ones measured (ask to registration, at each claim), or the
// configured estimate until one is. An `overflow` request waits for that worker rather than go
// to an external upstream when it would come within its TTFT objective
// (gateway/completion_call.h, "Overflow").
//
// Threads: any (a mutex inside); the planner's timer and the registry's threads share one.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "planner/planner.h"

namespace pdserve::gateway {

class BurstAsks {
 public:
  using TimePoint = std::chrono::system_clock::time_point;
  using Clock = std::function<TimePoint()>;

  // `assumed_cold_start`: a pool's cold start until one is measured (0: unknown, and no arrival
  // is predicted for it).
  explicit BurstAsks(std::chrono::duration<double> assumed_cold_start = {},
                     Clock clock = &std::chrono::system_clock::now);

  void Asked(planner::Pool pool, TimePoint when);
  // The planner no longer wants the newest worker it asked for (if it has not come).
  void Withdrawn(planner::Pool pool);
  // No more asks outstanding than workers still to come: the oldest beyond go.
  void KeepAtMost(planner::Pool pool, int outstanding);
  // A worker registered with this role and class: when it was asked for, if it was.
  std::optional<TimePoint> Claim(const std::string& role, CapacityClass capacity_class);
  int outstanding(planner::Pool pool) const;
  // When the oldest burst worker of `pool` still to come should register: its ask plus the cold
  // start, or now when that has passed; an ask overdue by a whole cold start again is not
  // counted on. nullopt when none is, or the pool's cold start is unknown.
  std::optional<TimePoint> NextArrival(planner::Pool pool) const;
  // The cold start a prediction uses for `pool` (0: unknown).
  std::chrono::duration<double> ColdStart(planner::Pool pool) const;

 private:
  static constexpr size_t kColdStartsKept = 5;
  std::chrono::duration<double> ColdStartLocked(planner::Pool pool) const;

  const std::chrono::duration<double> assumed_cold_start_;
  const Clock clock_;
  mutable std::mutex mu_;
  std::map<planner::Pool, std::deque<TimePoint>> asks_;      // oldest first
  std::map<planner::Pool, std::deque<double>> cold_starts_;  // seconds, the latest last
};

}  // namespace pdserve::gateway
