// Which decode workers' KV endpoints a prefill worker should not dial again yet. Connecting is
// synchronous in the worker's loop and may take the whole connect timeout (5 s) when the
// endpoint is gone; until the gateway drops that decode worker (its heartbeat timeout), every
// request routed there would stall all prefill work that long. After a failed attempt, requests
// to that endpoint fail at once (retryably: the gateway picks another pair) for a while, and the
// next attempt after that may find it back. One thread (the worker's loop).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace pdserve::prefill_pool {

class EndpointBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  explicit EndpointBackoff(Clock::duration hold = std::chrono::seconds(3)) : hold_(hold) {}

  // When `endpoint` failed, if that was less than the hold ago: do not dial it.
  std::optional<Clock::time_point> FailedRecently(const std::string& endpoint,
                                                  Clock::time_point now) const;
  void Failed(const std::string& endpoint, Clock::time_point now);
  void Succeeded(const std::string& endpoint) { failed_at_.erase(endpoint); }

 private:
  Clock::duration hold_;
  std::map<std::string, Clock::time_point> failed_at_;
};

}  // namespace pdserve::prefill_pool
