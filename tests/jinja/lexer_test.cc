// Tests for jinja/lexer.h: tokens, literals, line numbers and Hugging Face's whitespace
// settings (trim_blocks, lstrip_blocks, `-`/`+` markers).
#include "jinja/lexer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace pdserve::jinja {
namespace {

std::vector<Token> Lex(std::string_view source) {
  auto tokens = Tokenize(source, "t");
  EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
  return tokens.ok() ? *tokens : std::vector<Token>{};
}

// The template text the lexer keeps, joined with "|" between data tokens.
std::string Data(std::string_view source) {
  std::string out;
  for (const Token& t : Lex(source)) {
    if (t.type != TokenType::kData) continue;
    if (!out.empty()) out += "|";
    out += t.value;
  }
  return out;
}

TEST(LexerTest, SplitsTagsIntoTokens) {
  auto tokens = Lex("a{{ x.y + 1 }}b{% if n >= 2.5 %}");
  std::vector<TokenType> types;
  for (const Token& t : tokens) types.push_back(t.type);
  EXPECT_EQ(
      types,
      (std::vector<TokenType>{
          TokenType::kData, TokenType::kVariableBegin, TokenType::kName, TokenType::kOperator,
          TokenType::kName, TokenType::kOperator, TokenType::kInteger, TokenType::kVariableEnd,
          TokenType::kData, TokenType::kBlockBegin, TokenType::kName, TokenType::kName,
          TokenType::kOperator, TokenType::kFloat, TokenType::kBlockEnd, TokenType::kEof}));
  EXPECT_EQ(tokens[12].value, ">=");
  EXPECT_DOUBLE_EQ(tokens[13].number, 2.5);
}

TEST(LexerTest, ReadsLiterals) {
  auto tokens = Lex(R"({{ 'a\n\x41\u00e9' "q\"" 1_000 0x1f 0b11 0o17 1e3 7 }})");
  EXPECT_EQ(tokens[1].value, "a\nA\u00e9");
  EXPECT_EQ(tokens[2].value, "q\"");
  EXPECT_EQ(tokens[3].integer, 1000);
  EXPECT_EQ(tokens[4].integer, 31);
  EXPECT_EQ(tokens[5].integer, 3);
  EXPECT_EQ(tokens[6].integer, 15);
  EXPECT_EQ(tokens[7].type, TokenType::kFloat);
  EXPECT_DOUBLE_EQ(tokens[7].number, 1000);
  EXPECT_EQ(tokens[8].integer, 7);
  // An unknown escape keeps its backslash, as Python does.
  EXPECT_EQ(Lex(R"({{ 'a\d' }})")[1].value, "a\\d");
}

TEST(LexerTest, TrimBlocksAndLstripBlocks) {
  // trim_blocks drops the newline after a block tag, lstrip_blocks the indentation before it.
  EXPECT_EQ(Data("a\n  {% if x %}\n  b\n  {% endif %}\nc"), "a\n|  b\n|c");
  // Not before or after {{ }}.
  EXPECT_EQ(Data("  {{ x }}\nb"), "  |\nb");
  // Only whitespace back to the line start is stripped.
  EXPECT_EQ(Data("a  {% if x %}b{% endif %}"), "a  |b");
  // `+` keeps the indentation, `-` strips all whitespace on that side.
  EXPECT_EQ(Data("  {%+ if x %}"), "  ");
  EXPECT_EQ(Data("a \n\t{%- if x -%} \n b{% endif %}"), "a|b");
  EXPECT_EQ(Data("a {{- x -}}\n b"), "a|b");
  // Comments follow the block rules.
  EXPECT_EQ(Data("a\n  {# c #}\nb"), "a\n|b");
}

TEST(LexerTest, NormalisesNewlinesAndDropsOneTrailingNewline) {
  EXPECT_EQ(Data("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(Data("a\n\n"), "a\n");
}

TEST(LexerTest, RawBlocksAreText) { EXPECT_EQ(Data("{% raw %}{{ x }}{% endraw %}"), "{{ x }}"); }

TEST(LexerTest, BracketsInsideTagsAreBalanced) {
  auto tokens = Lex("{{ {'a': {'b': 1}} }}");
  EXPECT_EQ(tokens[tokens.size() - 2].type, TokenType::kVariableEnd);
  EXPECT_FALSE(Tokenize("{{ (1] }}", "t").ok());
}

TEST(LexerTest, ErrorsNameTheLine) {
  auto bad = Tokenize("a\nb\n{{ 1 ! 2 }}", "origin.jinja");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("origin.jinja:3:"), std::string::npos)
      << bad.status().message();
  auto comment = Tokenize("x\n{# never closed", "t");
  ASSERT_FALSE(comment.ok());
  EXPECT_NE(comment.status().message().find("Missing end of comment tag"), std::string::npos);
}

TEST(LexerTest, TokensCarryLineNumbers) {
  auto tokens = Lex("a\nb\n{{ x\n + y }}");
  EXPECT_EQ(tokens[1].line, 3);  // {{
  EXPECT_EQ(tokens[3].line, 4);  // +
}

}  // namespace
}  // namespace pdserve::jinja
