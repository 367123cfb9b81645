// TokenVocabulary::FromTokenizer, apart from the rest of token_vocabulary.cc so that what needs
// only the vocabulary (the schema's fuzz target) links without the tokenizer.
#include <algorithm>

#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::grammar {

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromTokenizer(const tokenizer::Tokenizer& t,
                                                                      int32_t vocab_size) {
  std::vector<std::string> bytes(static_cast<size_t>(std::max(vocab_size, 0)));
  const int32_t known = std::min(vocab_size, t.vocab_size());
  for (int32_t id = 0; id < known; ++id) {
    if (!t.IsSpecial(id)) bytes[static_cast<size_t>(id)] = t.TokenBytes(id);
  }
  return std::make_shared<const TokenVocabulary>(std::move(bytes));
}

}  // namespace pdserve::grammar
