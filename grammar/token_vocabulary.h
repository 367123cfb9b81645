// TokenVocabulary: the bytes each token id stands for, sorted once so that a GrammarMatcher can
// walk every token sharing a prefix together; TokenMask: one bit a token, the tokens a grammar
// admits next, applied to a row of logits. Both are immutable once built (a mask is filled by
// GrammarMatcher::FillMask) and may be shared by threads. Built by the engine from its model's
// tokenizer, and by tests and benchmarks from any tokenizer.json.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace pdserve::tokenizer {
class Tokenizer;
}

namespace pdserve::grammar {

class TokenVocabulary {
 public:
  // token_bytes[id]: what the token writes in the middle of a text; empty for a token a grammar
  // never admits (special tokens, ids the tokenizer lacks, padding rows).
  explicit TokenVocabulary(std::vector<std::string> token_bytes);
  // From a tokenizer, over the model's `vocab_size` ids (which may exceed the tokenizer's):
  // special tokens are left out.
  static std::shared_ptr<const TokenVocabulary> FromTokenizer(const tokenizer::Tokenizer& t,
                                                              int32_t vocab_size);

  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  // Ids with bytes, in the bytes' order; shared_prefix()[i] is how many leading bytes sorted()[i]
  // shares with sorted()[i - 1] (0 for the first).
  const std::vector<int32_t>& sorted() const { return sorted_; }
  const std::vector<int32_t>& shared_prefix() const { return shared_prefix_; }
  size_t longest() const { return longest_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> sorted_;
  std::vector<int32_t> shared_prefix_;
  size_t longest_ = 0;
};

class TokenMask {
 public:
  // All tokens refused.
  void Reset(int32_t vocab_size);
  void Allow(int32_t id) { bits_[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
  bool allowed(int32_t id) const {
    return id >= 0 && id < size_ && (bits_[static_cast<size_t>(id) >> 6] >> (id & 63) & 1);
  }
  int32_t size() const { return size_; }
  int32_t count() const;
  // Sets every refused token's logit to -infinity. `logits` may be longer than the mask (a
  // model's padding rows): those are refused too.
  void Apply(std::span<float> logits) const;

 private:
  std::vector<uint64_t> bits_;
  int32_t size_ = 0;
};

}  // namespace pdserve::grammar
