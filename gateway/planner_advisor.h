// PlannerAdvisor: the planner (planner/planner.h) inside the gateway, where its signals are
// (`pdserve gateway --planner advise|act`). Every interval it reads the registry's snapshot and
// the admission queue, decides, logs each change with its reason and exports
// pdserve_planner_desired_workers{pool,class} and pdserve_planner_decisions_total{pool,direction,
// reason}. In advise mode something else acts on the gauges (KEDA or HPA), or the local actuator
// follows the advice (`pdserve up --autoscale`); in act mode it hands each pool's burst count to
// an actuator. An actuator is driven through planner/actuation_loop.h.
// Burst workers it asked for and that have not registered yet count as starting, so it decides
// nothing more for their pool until they come (or start_timeout passes); each ask is noted in
// BurstAsks so that the worker is billed from it. Prefill and decode workers count; colocated
// ones are in no pool.
//
// Threads: Tick runs on one thread at a time (the gateway's planner timer).
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gateway/burst_asks.h"
#include "gateway/gateway_metrics.h"
#include "planner/actuation_loop.h"
#include "planner/planner.h"
#include "router/admission_queue.h"
#include "router/worker_registry.h"

namespace pdserve::gateway {

struct PlannerAdvisorOptions {
  planner::PlannerOptions planner;
  planner::PoolLimits prefill, decode;
  std::chrono::milliseconds interval{5000};
  // How long burst workers it asked for may take to register before they no longer count as
  // starting (an actuator that never acts must not freeze the pool).
  std::chrono::seconds start_timeout{300};
  // Act mode: carries out each pool's burst count (null: advise, act on nothing).
  std::shared_ptr<planner::Actuator> actuator;
  // Advise mode with an actuator that follows the advice (planner/local_actuator.h, as `pdserve
  // up --autoscale` runs it): its lines say "advise", not "act".
  bool advise = false;
  // Act mode among several gateways: asked every tick whether this gateway leads (ledger/
  // postgres_leadership.h); while it does not, it advises only, and its actuation loop is
  // stopped (an apply in progress ends first). Null: it always acts.
  std::function<bool()> may_act;
};

// The burst workers a pool still waits for: those the planner wants beyond those registered,
// while the last step up is younger than `start_timeout`; else 0.
int StartingWorkers(int desired_burst, int registered_burst,
                    std::chrono::steady_clock::duration since_last_up,
                    std::chrono::steady_clock::duration start_timeout);

// `pool`'s burst workers (not draining) by their registered names, the idlest first: the order
// the actuator lets them go in.
std::vector<std::string> DrainOrder(std::span<const router::WorkerLoad> workers,
                                    planner::Pool pool);

// Each pool's signals: its reserved and burst workers (not draining), the requests waiting
// (both pools'), the wait the queue predicts for a request arriving now (prefill), the share of
// decode KV pages in use, the recent inter-token latency and the median decode worker's unloaded
// step (decode), and the longest a burst
// worker has been idle. Starting workers are for the caller to fill in (StartingWorkers).
std::map<planner::Pool, planner::PoolSignals> PoolSignalsFrom(
    std::span<const router::WorkerLoad> workers, size_t queued, double predicted_wait_s,
    double itl_s);

class PlannerAdvisor {
 public:
  // `asks` (optional) records each step up for the ledger; the registry claims them.
  PlannerAdvisor(PlannerAdvisorOptions options, std::shared_ptr<router::WorkerRegistry> registry,
                 std::shared_ptr<router::AdmissionQueue> queue,
                 std::shared_ptr<GatewayMetrics> metrics, std::shared_ptr<BurstAsks> asks);
  void Tick(planner::Planner::Clock::time_point now);

 private:
  // Sets the desired-workers gauges of `pool` to what the planner wants now.
  void ExportDesired(planner::Pool pool);
  void StartActuation();
  std::shared_ptr<router::WorkerRegistry> registry_;
  std::shared_ptr<router::AdmissionQueue> queue_;
  std::shared_ptr<GatewayMetrics> metrics_;
  planner::Planner planner_;
  std::chrono::seconds start_timeout_;
  std::map<planner::Pool, planner::Planner::Clock::time_point> last_up_;
  std::shared_ptr<BurstAsks> asks_;
  const char* mode_;  // "advise" or "act", in log lines
  // Act mode: the actuator, and whether this gateway may act (options' may_act).
  std::shared_ptr<planner::Actuator> actuator_;
  bool advise_only_ = false;
  std::function<bool()> may_act_;
  // Admission's running counts at each Tick of the last kRefusalWindow: refusals for a predicted
  // wait, and requests that left the queue for their workers.
  static constexpr std::chrono::seconds kRefusalWindow{30};
  struct Counts {
    planner::Planner::Clock::time_point at;
    double refused = 0;
    int64_t started = 0, prompt_tokens = 0;
  };
  std::deque<Counts> counts_;
  // The prefill pool's workers at the last Tick, and the counts when it last grew (refusals and
  // starts count from there, within the window).
  int prefill_size_ = 0;
  std::optional<Counts> prefill_grew_;
  std::unique_ptr<planner::ActuationLoop> actuation_;  // last: its thread reads metrics_
};

}  // namespace pdserve::gateway
