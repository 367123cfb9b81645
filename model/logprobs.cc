#include "model/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pdserve::model {

RowLogprobs::RowLogprobs(std::span<const float> logits, int top_n) {
  const size_t n = logits.size();
  float max = -std::numeric_limits<float>::infinity();
  for (float x : logits) max = std::isnan(x) ? max : std::max(max, x);
  double sum = 0;
  for (float x : logits) {
    if (!std::isnan(x)) sum += std::exp(static_cast<double>(x) - max);
  }
  log_sum_exp_ = std::isinf(max) ? max : max + std::log(sum);
  const size_t k = std::min(n, static_cast<size_t>(std::clamp(top_n, 0, kMaxTopLogprobs)));
  if (k == 0) return;
  // The k largest by a single pass holding the best so far, smallest last.
  std::vector<std::pair<float, int32_t>> best;
  best.reserve(k + 1);
  auto before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  for (size_t i = 0; i < n; ++i) {
    const float x = logits[i];
    if (std::isnan(x)) continue;
    const std::pair<float, int32_t> item{x, static_cast<int32_t>(i)};
    if (best.size() == k && !before(item, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), item, before), item);
    if (best.size() > k) best.pop_back();
  }
  for (const auto& [logit, id] : best) top_.emplace_back(id, Of(logit));
}

float RowLogprobs::Of(float logit) const {
  if (std::isnan(logit) || std::isinf(logit) || std::isinf(log_sum_exp_)) {
    return kImpossibleLogprob;
  }
  return std::max(kImpossibleLogprob, static_cast<float>(logit - log_sum_exp_));
}

}  // namespace pdserve::model
