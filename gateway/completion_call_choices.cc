// CompletionCall's choices and its completed response: a request of several (OpenAI's n), each
// with its ResponseStream, an external upstream's choices relayed as it wrote them, and the body
// or stream tail they make (completion_call.h).
#include <spdlog/spdlog.h>

#include "common/json_text.h"
#include "gateway/completion_call.h"

namespace pdserve::gateway {

int CompletionCall::CompletionTokens() const {
  int tokens = response_.completion_tokens();
  for (const auto& c : more_choices_) tokens += c->completion_tokens();
  return tokens;
}

void CompletionCall::EndChoice(int index, const std::string& finish_reason, bool by_gateway) {
  choice_finish_[static_cast<size_t>(index)] = finish_reason;
  choice_stopped_by_gateway_ = choice_stopped_by_gateway_ || by_gateway;
  if (request_.stream) output_.write_stream(Choice(index).ChoiceTail(finish_reason));
  if (--open_choices_ > 0) return;
  if (choice_stopped_by_gateway_) workers_.attempts->Cancel(attempt_id_);
  Complete(choice_finish_[0]);
}

void CompletionCall::AttemptChoices(uint64_t id, const std::string& choices) {
  if (id != attempt_id_ || done_) return;
  HandleStarted(id);
  if (done_) return;
  nlohmann::json parsed = nlohmann::json::parse(choices, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_array()) return;  // ExternalCall passes arrays only
  relayed_choices_ = true;
  if (!external_text_) {  // the response has begun: no other attempt may serve it now
    external_text_ = true;
    first_output_attempt_ = id;
    NoteFirstOutput(std::chrono::steady_clock::now());
  }
  if (request_.stream) {
    output_.write_stream(response_.RelayedEvent(std::move(parsed)));
  } else {
    upstream_choices_ = std::move(parsed);
  }
}

void CompletionCall::SendCompletion() {
  if (completion_sent_) return;
  completion_sent_ = true;
  waiting_for_cost_ = false;
  if (cost_timer_) cost_timer_->cancel();
  // The row is committed before the client sees the end of the response.
  MaybeWriteRow(attempt_id_);
  const Attempt& attempt = attempts_by_id_[attempt_id_];
  const std::optional<double> cost =
      attempt.written ? std::optional<double>(attempt.cost_usd) : std::nullopt;
  if (!cost) {
    spdlog::warn("{}: the workers did not report the attempt's cost in time", response_.id());
  }
  const Usage usage{static_cast<int>(usage_prompt_tokens_.value_or(response_.prompt().size())),
                    CompletionTokens(), static_cast<int>(UsageCachedTokens())};
  if (request_.stream) {
    // Several choices: each one's finishing chunk went out when it ended; relayed: the
    // upstream's did.
    output_.finish(200,
                   more_choices_.empty() && !relayed_choices_
                       ? response_.StreamTail(finish_reason_, usage, cost, ServerTiming())
                       : response_.StreamEnd(usage, cost, ServerTiming()),
                   {}, false);
  } else {
    HttpHeaders headers{{"server-timing", ServerTiming()}};
    if (cost) headers.emplace_back("x-pdserve-cost-usd", ResponseStream::CostText(*cost));
    nlohmann::json body = response_.FullJson(finish_reason_, usage, cost);
    if (relayed_choices_) {
      body["choices"] = upstream_choices_;
    } else {
      for (size_t i = 0; i < more_choices_.size(); ++i) {
        body["choices"].push_back(
            more_choices_[i]->FullJson(choice_finish_[i + 1], usage, cost)["choices"][0]);
      }
    }
    output_.finish(200, DumpJson(body), std::move(headers), false);
  }
}

int64_t CompletionCall::UsageCachedTokens() const {
  auto it = attempts_by_id_.find(first_output_attempt_);
  if (it == attempts_by_id_.end()) return 0;
  const Attempt& a = it->second;
  if (a.upstream >= 0) return a.use ? a.use->api_cached_prompt_tokens : 0;
  return a.cached_prompt_tokens;  // Usage::ToJson clamps it to the prompt
}

}  // namespace pdserve::gateway
