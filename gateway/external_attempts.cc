#include "gateway/external_attempts.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/post.hpp>

namespace pdserve::gateway {

bool ExternalAttempts::Start(const AttemptSpec& spec, std::shared_ptr<AttemptListener> listener) {
  const router::UpstreamConfig& config = upstreams_->configs()[spec.upstream];
  Running& r = running_[spec.id];
  r.listener = std::move(listener);
  r.strand = spec.strand;
  r.upstream = spec.upstream;
  r.prompt_tokens = spec.prompt ? static_cast<int64_t>(spec.prompt->size()) : 0;
  auto self = shared_from_this();
  const uint64_t id = spec.id;
  auto body = UpstreamRequestBody(
      request_.client_body, config.model.empty() ? request_.model : config.model, request_.stream);
  if (!body.ok()) {  // the body was parsed once already: not expected
    ExternalEnd end;
    end.error = ApiError::Internal(body.status().message());
    end.retryable = false;
    boost::asio::post(spec.strand, [self, id, end] { self->HandleEnd(id, end); });
    return true;
  }
  ExternalCallbacks callbacks;
  callbacks.on_text = [self, id](const std::string& text) {
    auto it = self->running_.find(id);
    if (it == self->running_.end()) return;
    it->second.text += text;
    it->second.listener->AttemptText(id, text);
  };
  if (request_.relay_choices) {
    callbacks.on_choices = [self, id](const std::string& choices) {
      auto it = self->running_.find(id);
      if (it == self->running_.end()) return;
      it->second.relayed = true;
      it->second.listener->AttemptChoices(id, choices);
    };
  }
  callbacks.on_end = [self, id](const ExternalEnd& end) { self->HandleEnd(id, end); };
  const char* target =
      request_.endpoint == Endpoint::kChatCompletions ? "/v1/chat/completions" : "/v1/completions";
  r.call = ExternalCall::Start(spec.strand, tls_, config, target, std::move(body).value(),
                               request_.stream, std::move(callbacks));
  return true;
}

AttemptUse ExternalAttempts::UseOf(uint64_t id, const Running& r, const ExternalEnd& end) const {
  AttemptUse use;
  use.workers.attempt_id = id;
  use.upstream = r.upstream;
  if (end.completion_tokens) {
    use.api_completion_tokens = *end.completion_tokens;
  } else if (!r.text.empty()) {
    auto ids = tokenizer_->Encode(r.text, /*add_special=*/false);
    use.api_completion_tokens = ids.ok() ? static_cast<int64_t>(ids->size()) : 0;
  }
  // An attempt that failed before any text, and reported nothing, was not served: no tokens.
  const bool served = end.ok || !r.text.empty() || end.prompt_tokens || end.completion_tokens;
  use.api_prompt_tokens = end.prompt_tokens.value_or(served ? r.prompt_tokens : 0);
  use.api_cached_prompt_tokens =
      std::clamp<int64_t>(end.cached_prompt_tokens.value_or(0), 0, use.api_prompt_tokens);
  return use;
}

void ExternalAttempts::HandleEnd(uint64_t id, const ExternalEnd& end) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  Running r = std::move(it->second);
  running_.erase(it);
  upstreams_->Record(r.upstream, end.ok);
  const AttemptUse use = UseOf(id, r, end);
  if (end.ok) {
    r.listener->AttemptFinished(id, end.finish_reason.empty() ? "stop" : end.finish_reason,
                                use.api_prompt_tokens, use.api_completion_tokens);
  } else {
    metrics_->RecordExternalError(upstreams_->configs()[r.upstream].name);
    spdlog::warn("{}: {}", request_.request_id, end.error.message);
    AttemptFault fault;
    fault.message = end.error.message;
    fault.retryable = end.retryable && r.text.empty() && !r.relayed;
    fault.client_error = end.error;
    r.listener->AttemptFailed(id, fault);
  }
  r.listener->AttemptClosed(use);
}

void ExternalAttempts::Cancel(uint64_t id) {
  auto it = running_.find(id);
  if (it == running_.end()) return;
  Running r = std::move(it->second);
  running_.erase(it);
  if (r.call) r.call->Cancel();
  boost::asio::post(r.strand,
                    [l = r.listener, use = UseOf(id, r, ExternalEnd{})] { l->AttemptClosed(use); });
}

}  // namespace pdserve::gateway
