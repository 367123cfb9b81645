#include "router/self_hosted_rates.h"

namespace pdserve::router {

SelfHostedRates::SelfHostedRates(std::chrono::seconds window, Clock clock)
    : window_(window), clock_(std::move(clock)) {}

void SelfHostedRates::Record(int64_t prompt_tokens, double prefill_usd, int64_t completion_tokens,
                             double decode_usd) {
  if (prompt_tokens <= 0 && completion_tokens <= 0) return;
  const auto now = clock_();
  std::lock_guard lock(mu_);
  TrimLocked(now);
  entries_.push_back({now, prompt_tokens, completion_tokens, prefill_usd, decode_usd});
  prompt_tokens_ += prompt_tokens;
  completion_tokens_ += completion_tokens;
  prefill_usd_ += prefill_usd;
  decode_usd_ += decode_usd;
}

std::optional<double> SelfHostedRates::PredictUsd(int64_t prompt_tokens,
                                                  int64_t completion_tokens) const {
  std::lock_guard lock(mu_);
  TrimLocked(clock_());
  if (prompt_tokens_ <= 0 || completion_tokens_ <= 0) return std::nullopt;
  return prompt_tokens * (prefill_usd_ / prompt_tokens_) +
         completion_tokens * (decode_usd_ / completion_tokens_);
}

void SelfHostedRates::TrimLocked(std::chrono::steady_clock::time_point now) const {
  while (!entries_.empty() && now - entries_.front().at > window_) {
    const Entry& e = entries_.front();
    prompt_tokens_ -= e.prompt_tokens;
    completion_tokens_ -= e.completion_tokens;
    prefill_usd_ -= e.prefill_usd;
    decode_usd_ -= e.decode_usd;
    entries_.pop_front();
  }
  if (entries_.empty()) {  // no drift left over from the subtractions
    prefill_usd_ = decode_usd_ = 0;
    prompt_tokens_ = completion_tokens_ = 0;
  }
}

}  // namespace pdserve::router
