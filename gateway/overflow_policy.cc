#include "gateway/overflow_policy.h"

namespace pdserve::gateway {

namespace {
RouteChoice External(int upstream, const char* reason) {
  return {RouteChoice::Where::kExternal, upstream, reason};
}
}  // namespace

RouteChoice ChooseRoute(const RouteFacts& f) {
  using Where = RouteChoice::Where;
  const bool may_leave = f.rule != router::OverflowRule::kNever && f.why_not_external.empty() &&
                         f.upstreams_configured && f.picked_upstream >= 0;
  switch (f.moment) {
    case RouteMoment::kArrival:
      if (f.rule == router::OverflowRule::kCheapest && may_leave && f.self_hosted_usd &&
          f.upstream_usd && *f.upstream_usd < *f.self_hosted_usd) {
        return External(f.picked_upstream, "cheapest");
      }
      return {};
    case RouteMoment::kRefused: {
      if (f.burst_due_in_time) return {Where::kWaitForBurst, -1, ""};
      if (may_leave) return External(f.picked_upstream, "predicted_wait");
      const std::string why = !f.why_not_external.empty()
                                  ? "it cannot go to an external upstream: " + f.why_not_external
                              : f.upstreams_configured
                                  ? "no external upstream can take it: " + f.why_no_upstream
                                  : std::string("no external upstream is configured");
      return {Where::kNowhere, -1, why};
    }
    case RouteMoment::kOverflowTime:
      if (f.burst_due_in_time) return {Where::kWaitForBurst, -1, ""};
      if (may_leave) return External(f.picked_upstream, "queue_wait");
      return {};
    case RouteMoment::kExternalFailed:
      if (may_leave) return External(f.picked_upstream, "retry");
      return {};
  }
  return {};
}

}  // namespace pdserve::gateway
