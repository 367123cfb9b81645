#include "grammar/token_constraint.h"

namespace pdserve::grammar {

GrammarPlan::GrammarPlan(std::shared_ptr<const JsonGrammar> grammar,
                         std::shared_ptr<const TokenVocabulary> vocabulary, bool cache_masks)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)), cache_masks_(cache_masks) {}

const TokenMask& GrammarPlan::MaskFor(GrammarMatcher& matcher) {
  std::string key = matcher.StateKey();
  if (auto it = masks_.find(key); cache_masks_ && it != masks_.end()) {
    ++hits_;
    return it->second;
  }
  ++misses_;
  const size_t mask_bytes = (static_cast<size_t>(vocabulary_->size()) + 7) / 8 + 64;
  if (!cache_masks_ || (masks_.size() + 1) * mask_bytes > kMaxCachedMaskBytes) masks_.clear();
  TokenMask& mask = masks_[std::move(key)];
  matcher.FillMask(*vocabulary_, &mask);
  return mask;
}

GrammarPlans::GrammarPlans(std::shared_ptr<const TokenVocabulary> vocabulary, size_t max_plans)
    : vocabulary_(std::move(vocabulary)), max_plans_(std::max<size_t>(1, max_plans)) {}

Result<std::shared_ptr<GrammarPlan>> GrammarPlans::For(std::string_view schema,
                                                       std::string_view prefix,
                                                       std::string_view suffix) {
  // Lengths first, so that no two (prefix, schema, suffix) share a key.
  const std::string text = std::to_string(prefix.size()) + ":" + std::to_string(suffix.size()) +
                           ":" + std::string(prefix) + std::string(suffix) + std::string(schema);
  if (auto it = plans_.find(text); it != plans_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.second);
    return it->second.first;
  }
  PDSERVE_ASSIGN_OR_RETURN(std::shared_ptr<const JsonGrammar> grammar,
                           CompileJsonSchemaText(schema, prefix, suffix));
  if (plans_.size() >= max_plans_) {
    plans_.erase(recent_.back());
    recent_.pop_back();
  }
  auto plan = std::make_shared<GrammarPlan>(std::move(grammar), vocabulary_);
  recent_.push_front(text);
  plans_.emplace(text, std::make_pair(plan, recent_.begin()));
  return plan;
}

TokenConstraint::TokenConstraint(std::shared_ptr<GrammarPlan> plan)
    : plan_(std::move(plan)), matcher_(plan_->grammar()) {}

void TokenConstraint::Mask(std::span<float> logits, std::span<const int32_t> end_ids) {
  const TokenMask& mask = plan_->MaskFor(matcher_);
  const bool complete = matcher_.IsComplete();
  // Nothing the grammar admits is a token here: end if the model can, else leave it free.
  const bool stuck = !complete && mask.count() == 0;
  if (stuck && end_ids.empty()) return;
  auto in_row = [&](int32_t id) { return id >= 0 && static_cast<size_t>(id) < logits.size(); };
  kept_.clear();
  if (complete || stuck) {
    for (int32_t id : end_ids) kept_.push_back(in_row(id) ? logits[static_cast<size_t>(id)] : 0.0f);
  }
  mask.Apply(logits);
  for (size_t i = 0; i < kept_.size(); ++i) {
    if (in_row(end_ids[i])) logits[static_cast<size_t>(end_ids[i])] = kept_[i];
  }
}

bool TokenConstraint::Accept(int32_t token) {
  if (token < 0 || token >= plan_->vocabulary().size()) return false;
  const std::string& bytes = plan_->vocabulary().bytes(token);
  if (bytes.empty()) return false;
  return matcher_.Advance(bytes);
}

}  // namespace pdserve::grammar
