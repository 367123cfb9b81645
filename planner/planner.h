// Planner: the capacity layer's decisions (docs/architecture.md, "Processes"). Pure: every interval
// its owner passes what it observes of each pool (prefill, decode) and gets back the workers each
// pool and capacity class should have, with every change and its reason. Actuators (local
// processes, Slurm, Kubernetes, a command) carry the counts out; modes off/advise/act are the
// owner's.
//
// Rules, per pool, decided separately:
// - Reserved workers are the floor: their desired count is always the floor.
// - Up when the pool is short: prefill when the predicted TTFT exceeds the TTFT SLO, or when
//   admission refused over 5% of the requests (2 at least) for a predicted wait past it lately
//   (demand it shed is demand all the same), or requests wait and no worker runs (up from zero);
//   decode when KV use is above kv_high or the inter-token latency exceeds the ITL target (or
//   requests wait with no worker). The ITL target is the ITL SLO, or twice the workers' unloaded
//   ITL (one sequence in a step) where that is more: more workers cannot bring ITL below it. The
//   step is the burst workers the signal says are missing if the load spreads evenly (running x
//   signal / target, less those running; for refusals, running x (refused + started) / started), at
//   least one, within the burst maximum and the shared worker budget; then no other step up for
//   up_cooldown. A sized step (as Dynamo's SLA planner takes) costs one cold start per load step,
//   not one per worker.
// - No decision for a pool while workers it asked for are still starting.
// - Down when the pool has been comfortable (prefill: predicted TTFT under down_ratio of the
//   SLO, nothing queued or refused, and its workers but one would be busy under
//   down_utilisation of the time at the prompt tokens started lately; decode: KV use under kv_low
//   and ITL above its unloaded value by under down_ratio of the target's headroom over it, which
//   is down_ratio of the SLO where unloaded ITL is unknown) for down_hold without a break: one
//   burst worker, drained by the actuator, then the window starts again. Zero traffic is
//   comfortable, so the pools return to their floors.
// - Down at once, whatever the window, when a burst worker of a pool that is not short has had
//   no request for burst_idle (0: never) and the rest would stay under down_utilisation: idle
//   burst capacity is paid for and does nothing.
// - A pool never turns down within down_hold of a step up, nor up within up_cooldown of a step
//   down, so it changes direction at most once per load step.
//
// Threads: one owner; not thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/capacity_class.h"

namespace pdserve::planner {

enum class Pool { kPrefill, kDecode };
const char* PoolName(Pool pool);  // "prefill", "decode"

// What the owner observes of one pool now.
struct PoolSignals {
  int reserved = 0;         // registered workers of class reserved, not draining
  int burst = 0;            // registered workers of class burst, not draining
  int starting = 0;         // asked for and not registered yet
  int queued_requests = 0;  // waiting in the admission queue for this pool's work
  // Prefill: requests refused at admission for their predicted wait over the last 30 s, and
  // those admitted that started meanwhile. Short when at least 2 and over 5% of them were refused.
  int refused_requests = 0;
  int started_requests = 0;
  // Prefill: prompt tokens started a second over the pool's measured prefill rate (0: unknown).
  double utilisation = 0;
  double predicted_ttft_s = 0;  // prefill: for a request arriving now
  double kv_use = 0;            // decode: pages used over pages registered, 0..1
  double itl_s = 0;             // decode: recent inter-token latency (0: no traffic)
  // Decode: the workers' step with one sequence (0: not measured yet), the ITL no scaling goes
  // below.
  double unloaded_itl_s = 0;
  double burst_idle_s = 0;  // the longest any burst worker has held no request
};

struct PoolLimits {
  int reserved_floor = 1;
  int burst_max = 0;
};

struct PlannerOptions {
  double ttft_slo_s = 2.0;
  double itl_slo_s = 0.1;
  double kv_high = 0.85, kv_low = 0.4;
  double down_ratio = 0.5;  // comfortable below this fraction of an SLO
  // Prefill: a burst worker goes only if the rest would be busy below this share of the time.
  double down_utilisation = 0.6;
  std::chrono::seconds up_cooldown{30};
  std::chrono::seconds down_hold{120};
  int worker_budget = 0;  // all workers of both pools, reserved and burst; 0: no budget
  std::chrono::seconds burst_idle{0};  // a burst worker idle this long goes (0: never)
};

struct Decision {
  Pool pool = Pool::kPrefill;
  CapacityClass capacity_class = CapacityClass::kReserved;
  int delta = 0;       // workers: +N up, -1 down
  std::string reason;  // e.g. "predicted TTFT 3.1 s > SLO 2.0 s"
  // The rule, for a metric's label: "no_worker", "ttft", "refused", "kv_use", "itl" (up),
  // "comfortable", "burst_idle" (down).
  std::string cause;
};

struct Desired {
  int reserved = 0, burst = 0;
};

class Planner {
 public:
  using Clock = std::chrono::steady_clock;

  Planner(PlannerOptions options, std::map<Pool, PoolLimits> limits);

  // One interval: the changes decided now (at most one per pool). Pools without signals are
  // left as they are.
  std::vector<Decision> Decide(Clock::time_point now, const std::map<Pool, PoolSignals>& signals);
  // What each pool should have after the last Decide (the floor and no burst before any).
  Desired desired(Pool pool) const;

 private:
  struct PoolState {
    PoolLimits limits;
    Desired desired;
    Clock::time_point last_up, last_down;
    Clock::time_point comfortable_since;  // {}: not comfortable now
  };
  struct Shortage {
    std::string cause, reason;  // both "" when the pool is not short
    int missing = 0;            // burst workers the signal says are missing
  };
  Shortage ShortBecause(Pool pool, const PoolSignals& signals) const;
  bool Comfortable(Pool pool, const PoolSignals& signals) const;
  // Whether the pool's load would leave the rest under down_utilisation without one worker
  // (prefill; decode: always).
  bool CanLoseOne(Pool pool, const PoolSignals& signals) const;
  // The decode pool's ITL target: the SLO, or twice the unloaded ITL where that is more.
  double ItlTarget(const PoolSignals& signals) const;
  int DesiredTotal() const;

  PlannerOptions options_;
  std::map<Pool, PoolState> pools_;
};

}  // namespace pdserve::planner
