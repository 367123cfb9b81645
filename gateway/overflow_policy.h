// Overflow as a routing choice: where an attempt of a request goes, self-hosted workers or an
// external API, and why (docs/architecture.md, "Residency and external APIs"). A pure function
// of what the call knows at one of four moments; the call gathers the facts and does what the
// choice says. Any thread.
//
// - kArrival: a `cheapest` tenant's first attempt goes to the picked upstream when its price for
//   the prompt and max_tokens is below what self-hosted workers charged lately for as many
//   (none charged lately: it stays).
// - kRefused: admission predicts its TTFT objective would be missed. A burst worker due within
//   the objective serves it sooner: it waits for that. Otherwise the picked upstream, or nowhere
//   (503 no_allowed_route, with why).
// - kOverflowTime: it waited until its objective less its own prompt's time: a burst worker due
//   in time keeps it waiting, else the picked upstream, else it waits on until its deadline.
// - kExternalFailed: an upstream failed before any text reached the client: another upstream,
//   else self-hosted workers.
#pragma once

#include <optional>
#include <string>

#include "router/external_upstream.h"

namespace pdserve::gateway {

enum class RouteMoment { kArrival, kRefused, kOverflowTime, kExternalFailed };

struct RouteFacts {
  RouteMoment moment = RouteMoment::kArrival;
  router::OverflowRule rule = router::OverflowRule::kNever;
  // Why the request may not leave for an upstream ("" when it may): its body cannot be proxied,
  // or its tenant is pinned to zones (upstreams have none).
  std::string why_not_external;
  bool upstreams_configured = false;
  int picked_upstream = -1;     // the cheapest healthy upstream not yet failed (-1: none)
  std::string why_no_upstream;  // when none was picked among those configured
  // Prices of the request's prompt and max_tokens: what self-hosted workers charged lately
  // (unset: nothing lately) and the picked upstream's.
  std::optional<double> self_hosted_usd;
  std::optional<double> upstream_usd;
  // A burst prefill worker is due early enough to prefill the prompt within the objective
  // (its due time plus the prompt's time on a worker, before arrival plus the objective).
  bool burst_due_in_time = false;
};

struct RouteChoice {
  enum class Where {
    kSelfHosted,    // to the admission queue (kRefused: never; the call refuses instead)
    kExternal,      // to `upstream`
    kWaitForBurst,  // to the queue, no longer refused for its objective
    kNowhere,       // kRefused only: 503 no_allowed_route
  };
  Where where = Where::kSelfHosted;
  int upstream = -1;
  // kExternal: the reason the metrics and logs name (cheapest, predicted_wait, queue_wait,
  // retry); kNowhere: why no upstream could take it, as the client is told.
  std::string reason;
};

RouteChoice ChooseRoute(const RouteFacts& facts);

}  // namespace pdserve::gateway
