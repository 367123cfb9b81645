// Fuzz target: JSON Schemas from clients' response formats (grammar/json_grammar.h) and the
// matcher that follows them (grammar/grammar_matcher.h). The input is a schema, then a NUL byte,
// then a text: the schema compiles or is refused with a message; a compiled one's matcher is fed
// the text byte by byte, a mask is taken over a small vocabulary at every byte, and a token the
// mask allows must advance the matcher.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "grammar/grammar_matcher.h"
#include "grammar/json_grammar.h"
#include "grammar/token_vocabulary.h"

namespace {

using namespace pdserve::grammar;

const TokenVocabulary& Vocabulary() {
  static const TokenVocabulary v({"{",     "}",        "[",        "]",        "\"", ",",  ":",
                                  "\":",   "{\"",      "\",\"",    "0",        "12", "-",  ".5",
                                  "e+",    "true",     "false",    "null",     "a",  "ab", "\\",
                                  "u00e9", "\xC3\xA9", "\xF0\x9F", "\x98\x80", " ",  "x\""});
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t split = input.find('\0');
  const std::string_view schema = input.substr(0, split);
  const std::string_view text = split == std::string_view::npos ? "" : input.substr(split + 1);
  auto compiled = CompileJsonSchemaText(schema);
  if (!compiled.ok()) {
    if (compiled.status().message().empty()) abort();
    return 0;
  }
  GrammarMatcher m(*compiled);
  const TokenVocabulary& vocabulary = Vocabulary();
  size_t fed = 0;
  for (char c : text.substr(0, 256)) {
    TokenMask mask;
    m.FillMask(vocabulary, &mask);
    if (fed % 16 == 0) {
      for (int32_t id = 0; id < vocabulary.size(); ++id) {
        if (!mask.allowed(id)) continue;
        GrammarMatcher copy = m;
        if (!copy.Advance(vocabulary.bytes(id))) abort();  // the mask let through a refusal
      }
    }
    if (!m.Advance(std::string_view(&c, 1))) break;
    if (m.IsTerminated() && !m.IsComplete()) abort();
    ++fed;
  }
  (void)m.StateKey();
  return 0;
}
