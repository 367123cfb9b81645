// Fuzz target: tokenizer.json's text-splitting stages (tokenizer/pre_tokenizer.h): a normalizer or
// pre-tokenizer built from JSON (its first line, regex patterns included), then applied to the
// text after it. Building either is refused with a Status or succeeds; applying it to valid
// UTF-8 gives valid UTF-8 pieces or a Status.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"
#include "tokenizer/pre_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pdserve::tokenizer::Normalizer;
  using pdserve::tokenizer::PreTokenizer;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  const std::string_view config_text = input.substr(0, newline);
  const std::string_view text = input.substr(newline + 1);
  const auto config = nlohmann::json::parse(config_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  const bool valid_text = !pdserve::FindInvalidUtf8(text).has_value();

  if (auto normalizer = Normalizer::FromJson(config); normalizer.ok() && valid_text) {
    auto normalized = normalizer->Apply(text);
    if (normalized.ok() && pdserve::FindInvalidUtf8(*normalized)) abort();
  }
  if (auto pre_tokenizer = PreTokenizer::FromJson(config); pre_tokenizer.ok() && valid_text) {
    std::vector<std::string> pieces;
    if (pre_tokenizer->Split(text, pieces).ok()) {
      for (const auto& piece : pieces) {
        if (piece.empty()) abort();
        // ByteLevel maps bytes to printable characters, so its pieces are UTF-8 too.
        if (pdserve::FindInvalidUtf8(piece)) abort();
      }
    }
  }
  return 0;
}
