#include "prefill_pool/endpoint_backoff.h"

namespace pdserve::prefill_pool {

std::optional<EndpointBackoff::Clock::time_point> EndpointBackoff::FailedRecently(
    const std::string& endpoint, Clock::time_point now) const {
  auto it = failed_at_.find(endpoint);
  if (it == failed_at_.end() || now - it->second >= hold_) return std::nullopt;
  return it->second;
}

void EndpointBackoff::Failed(const std::string& endpoint, Clock::time_point now) {
  // Endpoints are few (one per decode worker); forget the ones whose hold has long passed.
  for (auto it = failed_at_.begin(); it != failed_at_.end();) {
    it = now - it->second >= 10 * hold_ ? failed_at_.erase(it) : std::next(it);
  }
  failed_at_[endpoint] = now;
}

}  // namespace pdserve::prefill_pool
