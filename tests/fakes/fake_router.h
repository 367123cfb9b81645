// FakeRouter: a Router (router/router.h) that returns the route a test scripts and keeps every
// snapshot and request it was asked about, for tests of code that routes (the registry).
// Thread-safe: Pick may run on any thread while the test reads what it saw.
#pragma once

#include <mutex>
#include <optional>
#include <vector>

#include "router/router.h"

namespace pdserve::router {

class FakeRouter final : public Router {
 public:
  // The route every Pick returns from now on (nullopt: none can take it).
  void Answer(std::optional<Route> route) {
    std::lock_guard lock(mu_);
    answer_ = route;
  }
  std::optional<Route> Pick(std::span<const WorkerLoad> workers,
                            const RouteRequest& request) const override {
    std::lock_guard lock(mu_);
    snapshots_.emplace_back(workers.begin(), workers.end());
    requests_.push_back(request);
    return answer_;
  }
  std::vector<std::vector<WorkerLoad>> snapshots() const {
    std::lock_guard lock(mu_);
    return snapshots_;
  }
  std::vector<RouteRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  mutable std::mutex mu_;
  std::optional<Route> answer_;
  mutable std::vector<std::vector<WorkerLoad>> snapshots_;
  mutable std::vector<RouteRequest> requests_;
};

}  // namespace pdserve::router
