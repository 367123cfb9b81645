// CompletionCall's routes beyond self-hosted workers: the overflow policy's facts, and what the
// call does with its choice (completion_call.h).
#include <boost/asio/post.hpp>
#include <cstdio>

#include "gateway/completion_call.h"
#include "gateway/ledger_rows.h"

namespace pdserve::gateway {

RouteFacts CompletionCall::Facts(RouteMoment moment) const {
  RouteFacts f;
  f.moment = moment;
  f.rule = overflow_.rule;
  f.why_not_external = overflow_.why_not_external;
  // Upstreams have no zone: a tenant pinned to zones keeps its data on its workers.
  if (f.why_not_external.empty() && !admission_.zones.empty()) {
    f.why_not_external =
        "its tenant is pinned to zones its workers run in, and no upstream has a zone";
  }
  f.upstreams_configured = overflow_.upstreams != nullptr;
  const int64_t prompt = static_cast<int64_t>(response_.prompt().size());
  if (f.upstreams_configured) {
    // The upstream's price for the part of the prompt it is believed to hold is its cached one.
    double usd = 0;
    f.picked_upstream =
        overflow_.upstreams->Pick(response_.prompt(), max_tokens_, failed_upstreams_, &usd);
    if (f.picked_upstream < 0) {
      f.why_no_upstream = overflow_.upstreams->WhyNone(failed_upstreams_);
    } else {
      f.upstream_usd = usd;
    }
  }
  // Both priced at the request's whole allowance: its prompt and max_tokens (the self-hosted
  // rates are what prompts cost lately, their cached parts included).
  if (const auto& rates = accounting_.accounting().rates) {
    f.self_hosted_usd = rates->PredictUsd(prompt, int64_t{std::max(1, request_.n)} * max_tokens_);
  }
  if (overflow_.next_burst) {
    const auto due = overflow_.next_burst();
    const auto own = std::chrono::duration_cast<std::chrono::system_clock::duration>(
        std::chrono::duration<double>(OwnPromptSeconds()));
    f.burst_due_in_time = due && *due + own <= arrival_wall_ + admission_.ttft_slo;
  }
  return f;
}

double CompletionCall::OwnPromptSeconds() const {
  const router::PrefillCapacity c = workers_.capacity->Prefill();
  const double per_worker = c.workers > 0 ? c.tokens_per_second / c.workers : 0;
  return per_worker > 0 ? static_cast<double>(response_.prompt().size()) / per_worker : 0;
}

std::optional<std::chrono::steady_clock::time_point> CompletionCall::OverflowTime() const {
  if (overflow_.rule == router::OverflowRule::kNever || admission_.ttft_slo.count() <= 0 ||
      !overflow_.upstreams || !admission_.zones.empty() || !overflow_.why_not_external.empty()) {
    return std::nullopt;
  }
  return arrival_ + admission_.ttft_slo -
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(OwnPromptSeconds()));
}

void CompletionCall::OverflowFromQueue() {
  overflow_deadline_ = false;
  refused_for_objective_ = false;  // whatever comes of it, it waits on from here
  waiting_for_burst_ = false;
  const RouteChoice choice = ChooseRoute(Facts(RouteMoment::kOverflowTime));
  if (choice.where == RouteChoice::Where::kExternal) {
    return StartExternal(choice.upstream, choice.reason);
  }
  if (choice.where == RouteChoice::Where::kWaitForBurst) {
    metrics_->RecordOverflowDeferred();
    admission_decision_ = "waited_for_burst";
  }
  Submit();  // back in the queue until the request's own deadline
}

bool CompletionCall::Overflow(const router::Admission& refusal) {
  const RouteChoice choice = ChooseRoute(Facts(RouteMoment::kRefused));
  switch (choice.where) {
    case RouteChoice::Where::kWaitForBurst:
      // A burst worker due within the objective serves it sooner than the objective asks. If
      // none has taken it by its overflow time, it leaves for an upstream then (Submit).
      refused_for_objective_ = false;
      waiting_for_burst_ = true;
      metrics_->RecordOverflowDeferred();
      admission_decision_ = "waited_for_burst";
      return Submit();
    case RouteChoice::Where::kExternal:
      StartExternal(choice.upstream, choice.reason);
      return true;
    case RouteChoice::Where::kSelfHosted:
    case RouteChoice::Where::kNowhere:
      break;
  }
  metrics_->RecordRejected("no_allowed_route");
  char wait[32];
  std::snprintf(wait, sizeof wait, "%.1f", refusal.predicted_wait_s);
  ApiError e = ApiError::Unavailable(
      std::string("No allowed route for this request: on self-hosted workers its predicted wait "
                  "of ") +
      wait + " s exceeds its time-to-first-token objective of " +
      std::to_string(admission_.ttft_slo.count()) + " ms, and " + choice.reason + ".");
  e.type = "capacity";
  e.code = "no_allowed_route";
  EndUnstarted(e, std::max(1, refusal.retry_after_s), "refused");
  return false;
}

void CompletionCall::StartExternal(int upstream, const std::string& reason) {
  if (!started_) admission_decision_ = "overflowed";  // its first route is the API
  attempts_by_id_[attempt_id_].upstream = upstream;
  overflow_.upstreams->Sent(upstream, response_.prompt());
  metrics_->RecordExternal(overflow_.upstreams->configs()[upstream].name, reason);
  AttemptSpec spec;
  spec.id = attempt_id_;
  spec.strand = strand_;
  spec.prompt = std::make_shared<const std::vector<int32_t>>(response_.prompt());
  spec.sampling = sampling_;
  spec.upstream = upstream;
  auto self = shared_from_this();
  overflow_.attempts->Start(spec, self);
  // Like a worker attempt leaving the queue: the client's response begins.
  boost::asio::post(strand_, [self, id = spec.id] { self->HandleStarted(id); });
}

}  // namespace pdserve::gateway
