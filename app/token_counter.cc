#include "app/token_counter.h"

#include "tokenizer/tokenizer.h"

namespace pdserve::app {

Result<bench::TokenCounter> LoadTokenCounter(const std::string& path) {
  if (path.empty()) return bench::TokenCounter();
  PDSERVE_ASSIGN_OR_RETURN(auto tokenizer, tokenizer::Tokenizer::Load(path));
  return bench::TokenCounter([tokenizer](std::string_view text) -> int64_t {
    auto ids = tokenizer->Encode(text, /*add_special=*/false, /*parse_special=*/false);
    return ids.ok() ? static_cast<int64_t>(ids->size()) : bench::EstimateTokens(text);
  });
}

}  // namespace pdserve::app
