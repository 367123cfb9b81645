// SelfHostedRates: what self-hosted workers have cost per token lately, from the compute the
// gateway charged its completed attempts over a recent window: each attempt's prefill and decode
// compute parts, as priced once for its ledger row (ledger/attempt_cost.h). A `cheapest` tenant's
// request compares its predicted cost here with an external upstream's price (docs/architecture.md,
// "Residency and external APIs"). The registry shares each step's time among the requests in it, so
// the rates follow utilisation: a decode step shared by few requests charges each of them more.
//
// Threads: any (a mutex inside). Written by CompletionCall as its rows are priced; read by
// CompletionCall when a `cheapest` request arrives.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

namespace pdserve::router {

class SelfHostedRates {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  explicit SelfHostedRates(std::chrono::seconds window = std::chrono::seconds(60),
                           Clock clock = &std::chrono::steady_clock::now);

  // A completed attempt: its prompt tokens prefilled for `prefill_usd` and its completion tokens
  // decoded for `decode_usd` (0 tokens: that phase ran elsewhere).
  void Record(int64_t prompt_tokens, double prefill_usd, int64_t completion_tokens,
              double decode_usd);
  // `prompt_tokens` at the window's USD per prompt token plus `completion_tokens` at its USD per
  // completion token; nullopt until the window holds tokens of both kinds.
  std::optional<double> PredictUsd(int64_t prompt_tokens, int64_t completion_tokens) const;

 private:
  struct Entry {
    std::chrono::steady_clock::time_point at;
    int64_t prompt_tokens, completion_tokens;
    double prefill_usd, decode_usd;
  };
  // Drops entries older than the window from the sums.
  void TrimLocked(std::chrono::steady_clock::time_point now) const;

  const std::chrono::seconds window_;
  const Clock clock_;
  mutable std::mutex mu_;
  mutable std::deque<Entry> entries_;  // oldest first; guarded by mu_
  mutable int64_t prompt_tokens_ = 0, completion_tokens_ = 0;
  mutable double prefill_usd_ = 0, decode_usd_ = 0;
};

}  // namespace pdserve::router
