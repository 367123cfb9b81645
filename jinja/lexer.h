// Splits a Jinja template into tokens as Jinja2's lexer does with Hugging Face's settings
// (trim_blocks, lstrip_blocks, the default delimiters): template text, `{{ }}` and `{% %}`
// tags with their names, literals and operators; comments and `{% raw %}` handled here. Line
// endings become "\n" and one trailing newline is dropped (keep_trailing_newline=False);
// `{%-`/`-%}` strip whitespace, `{%+` keeps it. Called by the parser (jinja/parser.h) only.
// Pure function: safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pdserve::jinja {

enum class TokenType {
  kData,           // template text, `value`
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifiers and keywords, `value`
  kString,         // a string literal, `value` unescaped
  kInteger,        // `integer`
  kFloat,          // `number`
  kOperator,       // `value`: "+", "//", "(", "==" ...
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;
  int64_t integer = 0;
  double number = 0;
  int line = 1;
};

// The tokens of `source`, ending with kEof. An unknown character, an unterminated comment or
// string, or a bad escape is InvalidArgument "ORIGIN:LINE: message".
Result<std::vector<Token>> Tokenize(std::string_view source, std::string_view origin);

}  // namespace pdserve::jinja
