// The routing policies of today's gateway (docs/architecture.md, "A request's life", step 2):
// - PdPairRouter: a decode worker D with the most free KV pages, each block of the prompt it is
//   believed to hold counting as a free page (then the smallest batch and fewest attempts), and a
//   prefill worker P with D's KV layout and the soonest predicted first token: the prompt tokens
//   sent to it and unanswered plus those of this prompt it lacks, at its measured prompt rate
//   (cache_aware_scoring.h: a cached prefix draws a request only while it saves more than the
//   cached worker's extra queue costs);
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
#include "router/router.h"

namespace pdserve::router {

class PdPairRouter final : public Router {
 public:
  std::optional<Route> Pick(std::span<const WorkerLoad> workers,
                            const RouteRequest& request) const override;
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
std::unique_ptr<Router> MakeDefaultRouter();
// The policy `--routing` names: "cache-aware" (MakeDefaultRouter) or "round-robin";
// InvalidArgument for another name.
Result<std::unique_ptr<Router>> MakeRouter(const std::string& routing);

}  // namespace pdserve::router
