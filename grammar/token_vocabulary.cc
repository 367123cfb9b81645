#include "grammar/token_vocabulary.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <numeric>

namespace pdserve::grammar {

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes)
    : bytes_(std::move(token_bytes)) {
  for (int32_t id = 0; id < size(); ++id) {
    if (!bytes_[static_cast<size_t>(id)].empty()) sorted_.push_back(id);
  }
  std::sort(sorted_.begin(), sorted_.end(), [&](int32_t x, int32_t y) {
    const std::string& a = bytes(x);
    const std::string& b = bytes(y);
    return a != b ? a < b : x < y;
  });
  shared_prefix_.resize(sorted_.size(), 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& t = bytes(sorted_[i]);
    longest_ = std::max(longest_, t.size());
    if (i == 0) continue;
    const std::string& prev = bytes(sorted_[i - 1]);
    const size_t n = std::min(prev.size(), t.size());
    size_t k = 0;
    while (k < n && prev[k] == t[k]) ++k;
    shared_prefix_[i] = static_cast<int32_t>(k);
  }
}

void TokenMask::Reset(int32_t vocab_size) {
  size_ = vocab_size;
  bits_.assign((static_cast<size_t>(vocab_size) + 63) / 64, 0);
}

int32_t TokenMask::count() const {
  int32_t n = 0;
  for (uint64_t w : bits_) n += std::popcount(w);
  return n;
}

void TokenMask::Apply(std::span<float> logits) const {
  constexpr float kRefused = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w < bits_.size(); ++w) {
    uint64_t refused = ~bits_[w];
    if (refused == 0) continue;
    const size_t base = w * 64;
    while (refused != 0) {
      const size_t i = base + static_cast<size_t>(std::countr_zero(refused));
      if (i >= n) break;
      logits[i] = kRefused;
      refused &= refused - 1;
    }
  }
  for (size_t i = static_cast<size_t>(size_); i < n; ++i) logits[i] = kRefused;
}

}  // namespace pdserve::grammar
