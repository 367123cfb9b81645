// Log-probabilities of one row of logits, as `logprobs` requests report them: the model's own
// distribution, log_softmax(logits), before temperature, top-k/top-p and any response format's
// mask (vLLM's default; OpenAI does not say), with the log-sum-exp taken in double. Pure; the
// engine's thread computes one per row that asks.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace pdserve::model {

// What OpenAI gives a token that cannot be drawn (JSON has no -infinity).
inline constexpr float kImpossibleLogprob = -9999.0f;
// top_logprobs at most (OpenAI's chat limit).
inline constexpr int kMaxTopLogprobs = 20;

class RowLogprobs {
 public:
  // `top_n` (0..kMaxTopLogprobs) of the most likely tokens are kept, the lower id first among
  // equal logits.
  RowLogprobs(std::span<const float> logits, int top_n);

  // The log-probability of a token whose logit is `logit` (kImpossibleLogprob for -infinity).
  float Of(float logit) const;
  // The top_n most likely tokens and their log-probabilities, most likely first.
  const std::vector<std::pair<int32_t, float>>& top() const { return top_; }

 private:
  double log_sum_exp_ = 0;
  std::vector<std::pair<int32_t, float>> top_;
};

}  // namespace pdserve::model
