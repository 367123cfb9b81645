// Fuzz target: encoding a client's text with a loaded tokenizer (tokenizer/tokenizer.h): the tiny
// Llama-3-style tokenizer.json of `pdserve make-model --preset tiny` (tests/fuzz/data). The
// first byte picks add_special and parse_special; the rest is the text. Valid UTF-8 encodes to
// ids in range that decode back to the same text; anything else is an InvalidArgument.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "tokenizer/tokenizer.h"

namespace {

const pdserve::tokenizer::Tokenizer& Tiny() {
  static const std::shared_ptr<const pdserve::tokenizer::Tokenizer> tokenizer = [] {
    auto loaded = pdserve::tokenizer::Tokenizer::Load(PDSERVE_FUZZ_DATA);
    if (!loaded.ok()) abort();
    return *loaded;
  }();
  return *tokenizer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& tokenizer = Tiny();
  const bool add_special = data[0] & 1, parse_special = data[0] & 2;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto ids = tokenizer.Encode(text, add_special, parse_special);
  const bool valid = !pdserve::FindInvalidUtf8(text).has_value();
  if (!ids.ok()) {
    if (valid) abort();  // the tiny tokenizer's regex hits no engine limit on short text
    return 0;
  }
  if (!valid) abort();
  for (int32_t id : *ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) abort();
  }
  // Byte-level BPE loses nothing: the text comes back, special tokens (BOS) left out.
  if (!parse_special && tokenizer.Decode(*ids, /*skip_special=*/true) != text) abort();
  return 0;
}
