// Constrained decoding as the engine uses it. GrammarPlan: one compiled JSON schema over one
// vocabulary, with the token mask of every grammar state met so far (a state recurs at every
// token of a string, every item of an array, every request with the same schema, so a mask is
// computed once and then costs a lookup). GrammarPlans: the plans of one engine by schema text,
// compiled on first use. TokenConstraint: one sequence's matcher, masking its logits before each
// sample and moving past the token sampled. All three belong to the engine's thread.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "grammar/grammar_matcher.h"
#include "grammar/json_grammar.h"
#include "grammar/token_vocabulary.h"

namespace pdserve::grammar {

class GrammarPlan {
 public:
  // cache_masks false: every mask is computed by the vocabulary walk (a benchmark's planted
  // fault, which its gate must catch).
  GrammarPlan(std::shared_ptr<const JsonGrammar> grammar,
              std::shared_ptr<const TokenVocabulary> vocabulary, bool cache_masks = true);

  // The tokens `matcher`'s grammar admits next, from the cache or computed now.
  const TokenMask& MaskFor(GrammarMatcher& matcher);
  const std::shared_ptr<const JsonGrammar>& grammar() const { return grammar_; }
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  int64_t mask_hits() const { return hits_; }
  int64_t mask_misses() const { return misses_; }

  // The masks kept at most (each is a bit a token): past it the cache starts again.
  static constexpr size_t kMaxCachedMaskBytes = size_t{64} << 20;

 private:
  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  bool cache_masks_;
  std::unordered_map<std::string, TokenMask> masks_;
  int64_t hits_ = 0, misses_ = 0;
};

class GrammarPlans {
 public:
  explicit GrammarPlans(std::shared_ptr<const TokenVocabulary> vocabulary, size_t max_plans = 64);
  // The plan of a schema's JSON text, its value between `prefix` and `suffix`; InvalidArgument
  // when it does not compile. The least recently used plan goes when there are max_plans
  // (sequences using it keep it).
  Result<std::shared_ptr<GrammarPlan>> For(std::string_view schema, std::string_view prefix = {},
                                           std::string_view suffix = {});
  const TokenVocabulary& vocabulary() const { return *vocabulary_; }

 private:
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  size_t max_plans_;
  std::list<std::string> recent_;  // schema texts, most recent first
  std::unordered_map<std::string,
                     std::pair<std::shared_ptr<GrammarPlan>, std::list<std::string>::iterator>>
      plans_;
};

class TokenConstraint {
 public:
  explicit TokenConstraint(std::shared_ptr<GrammarPlan> plan);

  // Refuses in `logits` (one row) every token the grammar does not admit next; `end_ids` stay
  // allowed where the text is a complete value. Where nothing would be left (a vocabulary
  // without some byte the grammar needs) the end ids are allowed, or with none, every token.
  void Mask(std::span<float> logits, std::span<const int32_t> end_ids);
  // Moves past a generated token: false when the grammar does not admit it (the state is then
  // unchanged). An end id is not text: the caller does not pass it.
  bool Accept(int32_t token);
  bool complete() const { return matcher_.IsComplete(); }
  // Complete, and no token may follow: the sequence is done.
  bool terminated() const { return matcher_.IsTerminated(); }

 private:
  std::shared_ptr<GrammarPlan> plan_;
  GrammarMatcher matcher_;
  std::vector<float> kept_;  // the end ids' logits through Mask
};

}  // namespace pdserve::grammar
