#include "tokenizer/detokenizer.h"

namespace pdserve::tokenizer {

IncrementalDetokenizer::IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                               bool skip_special)
    : tokenizer_(std::move(tokenizer)),
      skip_special_(skip_special),
      stream_(tokenizer_->decoder()) {}

std::string IncrementalDetokenizer::Add(int32_t id) {
  if (skip_special_ && tokenizer_->IsSpecial(id)) return {};
  std::string_view token = tokenizer_->TokenText(id);
  std::string text;
  if (!token.empty()) stream_.Add(token, text);  // empty: an id out of range, skipped by Decode
  return text;
}

std::string IncrementalDetokenizer::Flush() {
  std::string text;
  stream_.Finish(text);
  return text;
}

}  // namespace pdserve::tokenizer
