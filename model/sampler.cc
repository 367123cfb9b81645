#include "model/sampler.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

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
  if (logprobs < -1 || logprobs > 20) {
    return InvalidArgument("logprobs must be -1 (none) or from 0 to 20, got " +
                           std::to_string(logprobs));
  }
  if (prompt_logprobs && logprobs < 0) {
    return InvalidArgument("prompt_logprobs needs logprobs (the top count) from 0 to 20");
  }
  for (const auto& [token, bias] : logit_bias) {
    if (token < 0) return InvalidArgument("logit_bias names token " + std::to_string(token));
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return InvalidArgument("logit_bias values must be between -100 and 100, got " +
                             std::to_string(bias));
    }
  }
  if (n < 1 || n > kMaxChoices) {
    return InvalidArgument("n must be from 1 to " + std::to_string(kMaxChoices) + ", got " +
                           std::to_string(n));
  }
  if (samples_drawn < 0 || samples_drawn > kMaxSamplesDrawn) {
    return InvalidArgument("samples_drawn must be in [0, " + std::to_string(kMaxSamplesDrawn) +
                           "], got " + std::to_string(samples_drawn));
  }
  return Status::Ok();
}

int32_t ArgMax(std::span<const float> values) {
  const int n = static_cast<int>(values.size());
  const float* x = values.data();
  constexpr int kLanes = 8, kChains = 4;  // independent maxima, so compares overlap
  const float lowest = -std::numeric_limits<float>::infinity();
  __m256 best[kChains];
  __m256i best_at[kChains];
  for (int c = 0; c < kChains; ++c) {
    best[c] = _mm256_set1_ps(lowest);
    best_at[c] = _mm256_setzero_si256();
  }
  __m256i at = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i step = _mm256_set1_epi32(kLanes);
  int i = 0;
  for (; i + kChains * kLanes <= n; i += kChains * kLanes) {
    for (int c = 0; c < kChains; ++c) {
      const __m256 v = _mm256_loadu_ps(x + i + c * kLanes);
      // Strictly greater: a lane keeps its first maximum, and a NaN compares false.
      const __m256 greater = _mm256_cmp_ps(v, best[c], _CMP_GT_OQ);
      best[c] = _mm256_blendv_ps(best[c], v, greater);
      best_at[c] = _mm256_blendv_epi8(best_at[c], at, _mm256_castps_si256(greater));
      at = _mm256_add_epi32(at, step);
    }
  }
  float top = lowest;
  int32_t top_at = 0;
  alignas(32) float lane_best[kLanes];
  alignas(32) int32_t lane_at[kLanes];
  for (int c = 0; c < kChains; ++c) {
    _mm256_store_ps(lane_best, best[c]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(lane_at), best_at[c]);
    for (int l = 0; l < kLanes; ++l) {
      if (lane_best[l] > top || (lane_best[l] == top && lane_at[l] < top_at)) {
        top = lane_best[l];
        top_at = lane_at[l];
      }
    }
  }
  for (; i < n; ++i) {  // past every vector element: only a larger value wins
    if (x[i] > top) {
      top = x[i];
      top_at = i;
    }
  }
  if (top == lowest) {
    // Nothing above -inf: a lane that never took a value still says 0, so the answer is the
    // first value that is not a NaN (every such value is -inf), or 0.
    for (int j = 0; j < n; ++j) {
      if (!std::isnan(x[j])) return j;
    }
    return 0;
  }
  return top_at;
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed ? *params.seed : std::random_device{}()) {
  // Validate() bounds it; a sampler built from unchecked params skips at most that many.
  const int drawn = std::clamp(params.samples_drawn, 0, SamplingParams::kMaxSamplesDrawn);
  for (int i = 0; i < drawn; ++i) SkipSample();
}

void Sampler::SkipSample() {
  if (params_.greedy()) return;  // greedy draws nothing
  (void)std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

int32_t Sampler::Sample(std::span<const float> logits) {
  const int vocab = static_cast<int>(logits.size());
  if (params_.greedy()) {
    return ArgMax(logits);
  }
  // Probabilities at this temperature (unnormalised), by token id.
  const float max_logit = logits[ArgMax(logits)];
  candidates_.resize(vocab);
  double total = 0;
  int32_t last_possible = 0;
  // Below -104 a float's exp is 0 (skipping the call there spares its slow underflow path).
  constexpr float kExpIsZeroBelow = -104.0f;
  for (int i = 0; i < vocab; ++i) {
    const float x = (logits[i] - max_logit) / params_.temperature;
    const float p = x < kExpIsZeroBelow ? 0.0f : std::exp(x);
    candidates_[i] = {p, i};
    total += p;
    if (p > 0) last_possible = i;
  }
  const bool top_k = params_.top_k > 0 && params_.top_k < vocab;
  if (!top_k && params_.top_p >= 1.0f) {
    // Every token stays in: the draw needs no order, and walks the tokens by id.
    double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
    for (int i = 0; i < vocab; ++i) {
      u -= candidates_[i].first;
      if (u < 0) return i;
    }
    return last_possible;  // u was within rounding of the total
  }
  // Most likely first (the lower id among equals); only as many ordered as the cut needs: the
  // top k, or the nucleus, found by ordering ever larger heads of the list (a real model's
  // nucleus is a few tokens; a flat distribution's is most of the vocabulary).
  auto by_prob = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  const auto begin = candidates_.begin();
  int ordered = 0;  // [0, ordered) holds the most likely tokens, in order
  auto order_head = [&](int n) {
    if (n < vocab) std::nth_element(begin + ordered, begin + n, candidates_.end(), by_prob);
    std::sort(begin + ordered, begin + n, by_prob);
    ordered = n;
  };
  int keep = vocab;
  if (top_k) {
    keep = params_.top_k;
    order_head(keep);
    total = 0;
    for (int i = 0; i < keep; ++i) total += candidates_[i].first;
  }
  if (params_.top_p < 1.0f) {
    const double cut = params_.top_p * total;
    double cumulative = 0;
    int nucleus = 0;
    bool reached = false;
    while (!reached && nucleus < keep) {
      if (nucleus == ordered) order_head(std::min(keep, std::max(256, 2 * ordered)));
      while (nucleus < ordered) {
        cumulative += candidates_[nucleus++].first;
        if (cumulative >= cut) {
          reached = true;
          break;
        }
      }
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
