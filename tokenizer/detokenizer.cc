#include "tokenizer/detokenizer.h"

#include "tokenizer/byte_level.h"

namespace pdserve::model {

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               bool skip_special)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::Add(int32_t id) {
  if (skip_special_ && tokenizer_->IsSpecial(id)) return {};
  pending_ += tokenizer_->TokenBytes(id);
  // Everything but a tail that more bytes could still complete is final: converting it now
  // gives the same text (U+FFFD included) as converting the whole stream at the end.
  size_t held = IncompleteUtf8Suffix(pending_);
  std::string text;
  AppendUtf8Lossy(std::string_view(pending_).substr(0, pending_.size() - held), text);
  pending_.erase(0, pending_.size() - held);
  return text;
}

std::string IncrementalDetokenizer::Flush() {
  std::string text;
  AppendUtf8Lossy(pending_, text);
  pending_.clear();
  return text;
}

}  // namespace pdserve::model
