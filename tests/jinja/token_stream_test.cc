// Tests for jinja/token_stream.h: the cursor, Jinja2's token names in errors, the nesting count.
#include "jinja/token_stream.h"

#include <gtest/gtest.h>

namespace pdserve::jinja {
namespace {

TokenStream StreamOf(std::string_view source) {
  auto tokens = Tokenize(source, "t.jinja");
  EXPECT_TRUE(tokens.ok()) << tokens.status().ToString();
  return TokenStream(tokens.ok() ? std::move(tokens).value() : std::vector<Token>{Token{}},
                     "t.jinja");
}

TEST(TokenStreamTest, PeeksConsumesAndExpects) {
  TokenStream ts = StreamOf("{% for x in y %}");
  EXPECT_EQ(ts.Current().type, TokenType::kBlockBegin);
  ts.Next();
  EXPECT_TRUE(ts.SkipName("for"));
  EXPECT_FALSE(ts.SkipName("in"));
  EXPECT_TRUE(TokenStream::IsName(ts.Look(), "in"));
  EXPECT_EQ(*ts.ExpectName(), "x");
  EXPECT_FALSE(ts.ExpectOp("(").ok());
  EXPECT_TRUE(ts.SkipName("in"));
  ts.Next();
  EXPECT_TRUE(ts.ExpectBlockEnd().ok());
  EXPECT_EQ(ts.Current().type, TokenType::kEof);
  ts.Next();  // never past the end
  EXPECT_EQ(ts.Current().type, TokenType::kEof);
}

TEST(TokenStreamTest, ErrorsNameOriginLineAndToken) {
  TokenStream ts = StreamOf("\n\n{{ x }}");
  ts.Next();  // the text
  ts.Next();  // {{
  Status status = ts.ExpectOp("(");
  EXPECT_EQ(status.message(), "t.jinja:3: expected token '(', got 'x'");
  EXPECT_EQ(ts.Fail("at a given line", 7).message(), "t.jinja:7: at a given line");
  EXPECT_EQ(TokenStream::Describe(Token{}), "end of template");
}

TEST(TokenStreamTest, NestingCountsLevelsWhileTheyLast) {
  TokenStream ts = StreamOf("x");
  {
    TokenStream::Nesting outer(ts);
    EXPECT_FALSE(outer.too_deep());
  }
  std::vector<std::unique_ptr<TokenStream::Nesting>> levels;
  for (int i = 0; i < TokenStream::kMaxNesting; ++i) {
    levels.push_back(std::make_unique<TokenStream::Nesting>(ts));
  }
  EXPECT_FALSE(levels.back()->too_deep());
  TokenStream::Nesting one_more(ts);
  EXPECT_TRUE(one_more.too_deep());
}

}  // namespace
}  // namespace pdserve::jinja
