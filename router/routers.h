// The routing policies of today's gateway (docs/architecture.md, "A request's life", step 2):
// - PdPairRouter: a decode worker D with the most free KV pages, each block of the prompt it is
//   believed to hold counting as a free page (then the smallest batch and fewest attempts), and a
//   prefill worker P with D's KV layout and the soonest predicted first token: the prompt tokens
//   sent to it to compute and unanswered plus those of this prompt it lacks, weighted, at its
//   measured prompt rate (cache_aware_scoring.h: a cached prefix draws a request only while the
//   work it saves outweighs the cached worker's extra queue, and past that worker's step budget
//   only within CacheAffinity::queue_steps);
//   then, per request, whether D prefills the prompt itself instead (conditional
//   disaggregation: Disaggregation below, ChoosePlacement);
// - ColocatedRouter: the worker of role both with the most free pages, cached blocks counted as
//   for D (then the smallest batch);
// - FallbackRouter: the first of its routers that finds a route (the default: a P/D pair, else
//   a colocated worker).
// - RoundRobinRouter: each attempt the next usable worker in turn (a P/D pair, else a colocated
//   worker), blind to load and caches past room for the request: a plain balancer, the baseline
//   cache-aware routing is measured against (`pdserve gateway --routing round-robin`).
// Ties go to the lowest worker id. Pure and immutable, but for RoundRobinRouter's turn (an
// atomic): safe from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "router/cache_aware_scoring.h"
#include "router/router.h"

namespace pdserve::router {

// How far a cached prefix draws a prompt to its prefill worker (cache_aware_scoring.h).
struct CacheAffinity {
  // PrefillJob::work_weight: what a prompt token computed weighs beyond its own first token
  // (>= 0; 0: the soonest predicted first token wins).
  double work_weight = 1.0;
  // A worker past its step budget still takes a prompt for a longer cached prefix while the
  // prompt tokens it holds to compute stay within this many steps (>= 0; 0: never).
  int queue_steps = 2;
};

// Whether an attempt with a decode worker uses a prefill worker (Route::placement "pair") or
// is prefilled by its decode worker ("local"): per request by predicted time to first token
// (ChoosePlacement, reasons "short_uncached", "local_faster" and "pair_faster"; local with
// reason "no_prefill_worker" when no prefill worker of its layout serves), or always one.
// The default is kAlways: admission's prediction and the planner count prompt work on prefill
// workers only, so local prefill on decode workers is an opt-in (`--disaggregation
// conditional`) until they count it too.
enum class Disaggregation {
  kConditional,
  kAlways,  // reason "always": every attempt a pair (waiting for a prefill worker's room)
  kNever,   // reason "never": every attempt local
};
// "conditional", "always", "never"; ParseDisaggregation: InvalidArgument for another name.
const char* ToString(Disaggregation d);
Result<Disaggregation> ParseDisaggregation(const std::string& name);

struct PairRouting {
  CacheAffinity affinity;
  Disaggregation disaggregation = Disaggregation::kAlways;
  PlacementOptions placement;  // kConditional only
};

class PdPairRouter final : public Router {
 public:
  explicit PdPairRouter(PairRouting routing = {}) : routing_(routing) {}
  std::optional<Route> Pick(std::span<const WorkerLoad> workers,
                            const RouteRequest& request) const override;

 private:
  PairRouting routing_;
};

class ColocatedRouter final : public Router {
 public:
  std::optional<Route> Pick(std::span<const WorkerLoad> workers,
                            const RouteRequest& request) const override;
};

class FallbackRouter final : public Router {
 public:
  explicit FallbackRouter(std::vector<std::unique_ptr<Router>> routers);
  std::optional<Route> Pick(std::span<const WorkerLoad> workers,
                            const RouteRequest& request) const override;

 private:
  std::vector<std::unique_ptr<Router>> routers_;
};

class RoundRobinRouter final : public Router {
 public:
  std::optional<Route> Pick(std::span<const WorkerLoad> workers,
                            const RouteRequest& request) const override;

 private:
  mutable std::atomic<uint64_t> turn_{0};
};

// A P/D pair where one exists, else a colocated worker.
std::unique_ptr<Router> MakeDefaultRouter(PairRouting pair = {});
// The policy `--routing` names: "cache-aware" (MakeDefaultRouter) or "round-robin";
// InvalidArgument for another name or options out of range.
Result<std::unique_ptr<Router>> MakeRouter(const std::string& routing, PairRouting pair = {});

}  // namespace pdserve::router
