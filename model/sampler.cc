#include "model/sampler.h"

#include <algorithm>
#include <cmath>

namespace pdserve::model {

Status SamplingParams::Validate() const {
  if (!(temperature >= 0.0f && temperature <= 100.0f)) {
    return InvalidArgument("temperature must be between 0 and 100, got " +
                           std::to_string(temperature));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return InvalidArgument("top_p must be in (0, 1], got " + std::to_string(top_p));
  }
  if (top_k < 0) return InvalidArgument("top_k must be >= 0, got " + std::to_string(top_k));
  if (max_tokens < 1)
    return InvalidArgument("max_tokens must be >= 1, got " + std::to_string(max_tokens));
  for (const auto& s : stop) {
    if (s.empty()) return InvalidArgument("stop strings must not be empty");
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed ? *params.seed : std::random_device{}()) {}

void Sampler::SkipSample() {
  if (params_.greedy()) return;  // greedy draws nothing
  (void)std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

int32_t Sampler::Sample(std::span<const float> logits) {
  const int vocab = static_cast<int>(logits.size());
  if (params_.greedy()) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  }
  // Probabilities at this temperature, most likely first.
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  candidates_.resize(vocab);
  for (int i = 0; i < vocab; ++i) {
    candidates_[i] = {std::exp((logits[i] - max_logit) / params_.temperature), i};
  }
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  int keep = vocab;
  if (params_.top_k > 0 && params_.top_k < vocab) {
    keep = params_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_prob);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_prob);
  }
  double total = 0;
  for (int i = 0; i < keep; ++i) total += candidates_[i].first;
  if (params_.top_p < 1.0f) {
    double cumulative = 0;
    int nucleus = 0;
    while (nucleus < keep) {
      cumulative += candidates_[nucleus++].first;
      if (cumulative >= params_.top_p * total) break;
    }
    keep = nucleus;
    total = cumulative;
  }
  double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (int i = 0; i < keep; ++i) {
    u -= candidates_[i].first;
    if (u < 0) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;
}

}  // namespace pdserve::model
