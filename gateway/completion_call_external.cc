// CompletionCall's external attempts: overflow to an upstream, its text and end, its ledger row
// (completion_call.h, "Overflow").
#include <spdlog/spdlog.h>

#include <cstdio>

#include "common/json_text.h"
#include "gateway/completion_call.h"
#include "gateway/ledger_rows.h"

namespace pdserve::gateway {

namespace {
constexpr int kMaxExternalAttempts = 3;  // failures before the request gives up
}  // namespace

bool CompletionCall::MayGoExternal() const {
  return overflow_.upstreams && admission_.zones.empty() && WhyNotExternal(request_).empty();
}

int CompletionCall::CheaperUpstream() const {
  if (!MayGoExternal()) return -1;
  const int64_t prompt = static_cast<int64_t>(prompt_.size());
  const int upstream = overflow_.upstreams->Pick(prompt, max_tokens_, failed_upstreams_);
  if (upstream < 0 || !accounting_.rates) return -1;
  // Both priced at the request's whole allowance: its prompt and max_tokens.
  const std::optional<double> self_hosted = accounting_.rates->PredictUsd(prompt, max_tokens_);
  const double api = ExternalCostUsd(overflow_.upstreams->configs()[upstream], prompt, max_tokens_);
  return self_hosted && api < *self_hosted ? upstream : -1;
}

bool CompletionCall::BurstDueInTime() const {
  if (!overflow_.next_burst) return false;
  const auto due = overflow_.next_burst();
  return due && *due <= arrival_wall_ + admission_.ttft_slo;
}

std::optional<std::chrono::steady_clock::time_point> CompletionCall::OverflowTime() const {
  if (overflow_.rule == router::OverflowRule::kNever || admission_.ttft_slo.count() <= 0 ||
      !MayGoExternal()) {
    return std::nullopt;
  }
  const router::PrefillCapacity c = registry_->Prefill();
  const double per_worker = c.workers > 0 ? c.tokens_per_second / c.workers : 0;
  const double own_s = per_worker > 0 ? static_cast<double>(prompt_.size()) / per_worker : 0;
  return arrival_ + admission_.ttft_slo -
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(own_s));
}

void CompletionCall::OverflowFromQueue() {
  overflow_deadline_ = false;
  refused_for_objective_ = false;  // whatever comes of it, it waits on from here
  const bool burst_due = BurstDueInTime();
  const int upstream = burst_due ? -1
                                 : overflow_.upstreams->Pick(static_cast<int64_t>(prompt_.size()),
                                                             max_tokens_, failed_upstreams_);
  if (upstream >= 0) return StartExternal(upstream, "queue_wait");
  if (burst_due) metrics_->RecordOverflowDeferred();
  Submit();  // back in the queue until the request's own deadline
}

bool CompletionCall::Overflow(const router::Admission& refusal) {
  // A burst worker due within the objective serves it sooner than the objective asks: wait.
  if (refused_for_objective_ && BurstDueInTime()) {
    refused_for_objective_ = false;
    metrics_->RecordOverflowDeferred();
    return Submit();
  }
  std::string why_not = WhyNotExternal(request_);
  // Upstreams have no zone: a tenant pinned to zones keeps its data on its workers.
  if (why_not.empty() && !admission_.zones.empty()) {
    why_not = "its tenant is pinned to zones its workers run in, and no upstream has a zone";
  }
  int upstream = -1;
  if (why_not.empty() && overflow_.upstreams) {
    upstream = overflow_.upstreams->Pick(static_cast<int64_t>(prompt_.size()), max_tokens_,
                                         failed_upstreams_);
  }
  if (upstream >= 0) {
    StartExternal(upstream, "predicted_wait");
    return true;
  }
  metrics_->RecordRejected("no_allowed_route");
  char wait[32];
  std::snprintf(wait, sizeof wait, "%.1f", refusal.predicted_wait_s);
  const std::string elsewhere =
      !why_not.empty() ? "it cannot go to an external upstream: " + why_not
      : overflow_.upstreams
          ? "no external upstream can take it: " + overflow_.upstreams->WhyNone(failed_upstreams_)
          : std::string("no external upstream is configured");
  ApiError e = ApiError::Unavailable(
      std::string("No allowed route for this request: on self-hosted workers its predicted wait "
                  "of ") +
      wait + " s exceeds its time-to-first-token objective of " +
      std::to_string(admission_.ttft_slo.count()) + " ms, and " + elsewhere + ".");
  e.type = "capacity";
  e.code = "no_allowed_route";
  EndUnstarted(e, std::max(1, refusal.retry_after_s));
  return false;
}

void CompletionCall::StartExternal(int upstream, const std::string& reason) {
  const router::UpstreamConfig& config = overflow_.upstreams->configs()[upstream];
  attempts_by_id_[attempt_id_].upstream = upstream;
  metrics_->RecordExternal(config.name, reason);
  auto body = UpstreamRequestBody(
      overflow_.client_body, config.model.empty() ? request_.model : config.model, request_.stream);
  auto self = shared_from_this();
  const uint64_t id = attempt_id_;
  if (!body.ok()) {  // the body was parsed once already: not expected
    ExternalEnd end;
    end.error = ApiError::Internal(body.status().message());
    end.retryable = false;
    boost::asio::post(strand_, [self, id, end] { self->HandleExternalEnd(id, end); });
    return;
  }
  ExternalCallbacks callbacks;
  callbacks.on_text = [self, id](const std::string& text) { self->HandleExternalText(id, text); };
  callbacks.on_end = [self, id](const ExternalEnd& end) { self->HandleExternalEnd(id, end); };
  const char* target =
      request_.endpoint == Endpoint::kChatCompletions ? "/v1/chat/completions" : "/v1/completions";
  external_ = ExternalCall::Start(strand_, overflow_.tls, config, target, std::move(body).value(),
                                  request_.stream, std::move(callbacks));
  // Like a worker attempt leaving the queue: the client's response begins.
  boost::asio::post(strand_, [self, id] { self->HandleStarted(id); });
}

void CompletionCall::HandleExternalText(uint64_t id, const std::string& text) {
  if (id != attempt_id_ || done_) return;
  HandleStarted(id);
  if (done_ || text.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (!external_text_) {
    external_text_ = true;
    first_token_wall_ = std::chrono::system_clock::now();
    first_token_ = now;
    metrics_->RecordFirstToken(std::chrono::duration<double>(now - arrival_).count());
  }
  last_token_ = now;
  text_ += text;
  if (request_.stream) output_.write_stream(SseEvent(builder_.Delta(text)));
}

void CompletionCall::SetExternalUsage(Attempt& a, const ExternalEnd& end) {
  int64_t completion = 0;
  if (end.completion_tokens) {
    completion = *end.completion_tokens;
  } else if (!text_.empty()) {  // retried only before any text: all of it is this attempt's
    auto ids = tokenizer_->Encode(text_, /*add_special=*/false);
    completion = ids.ok() ? static_cast<int64_t>(ids->size()) : 0;
  }
  // An attempt that failed before any text, and reported nothing, was not served: no tokens.
  const bool served = end.ok || external_text_ || end.prompt_tokens || end.completion_tokens;
  a.external_prompt_tokens =
      end.prompt_tokens.value_or(served ? static_cast<int64_t>(prompt_.size()) : 0);
  a.external_completion_tokens = completion;
}

void CompletionCall::HandleExternalEnd(uint64_t id, const ExternalEnd& end) {
  if (id != attempt_id_ || done_) return;
  HandleStarted(id);
  if (done_) return;
  external_.reset();
  Attempt& a = attempts_by_id_[attempt_id_];
  const int upstream = a.upstream;
  const std::string& name = overflow_.upstreams->configs()[upstream].name;
  overflow_.upstreams->Record(upstream, end.ok);
  SetExternalUsage(a, end);
  if (end.ok) {
    completion_tokens_ = static_cast<int>(a.external_completion_tokens);
    usage_prompt_tokens_ = a.external_prompt_tokens;
    return Complete(end.finish_reason.empty() ? "stop" : end.finish_reason);
  }
  metrics_->RecordExternalError(name);
  spdlog::warn("{}: {}", builder_.id(), end.error.message);
  ++failures_;
  failed_upstreams_.insert(upstream);
  // Nothing reached the client yet: another upstream, else self-hosted workers, may serve it.
  if (!external_text_ && end.retryable && failures_ < kMaxExternalAttempts) {
    EndAttempt(AttemptStatus::kRetried);
    const int next = overflow_.upstreams->Pick(static_cast<int64_t>(prompt_.size()), max_tokens_,
                                               failed_upstreams_);
    if (next >= 0) {
      NewAttempt();
      return StartExternal(next, "retry");
    }
    Admit();  // a retry: it waits for workers, not refused for its objective
    return;
  }
  done_ = true;
  metrics_->running().Decrement();
  metrics_->RecordFailed();
  finish_reason_ = "error";
  EndAttempt(AttemptStatus::kError);
  const ApiError& e = end.error;
  if (request_.stream) {
    output_.finish(e.http_status, SseError(e) + SseDone(), {}, true);
  } else {
    output_.finish(e.http_status, DumpJson(e.ToJson()), {}, true);
  }
}

void CompletionCall::WriteExternalRow(uint64_t attempt_id) {
  Attempt& a = attempts_by_id_[attempt_id];
  if (a.written || !a.status) return;
  a.written = true;
  AttemptRow row = BaseRow(attempt_id, a);
  const router::UpstreamConfig& upstream = overflow_.upstreams->configs()[a.upstream];
  PriceExternalRow(upstream, a.external_prompt_tokens, a.external_completion_tokens, &row);
  a.cost_usd = row.cost.total();
  metrics_->RecordCost(accounting_.tenant, row);
  if (accounting_.ledger) {
    if (Status s = accounting_.ledger->Append(row); !s.ok()) {
      spdlog::error("ledger: could not record {} attempt {}: {}", row.request_id, row.attempt,
                    s.ToString());
    }
  }
}

}  // namespace pdserve::gateway
