// A cursor over the lexer's tokens (jinja/lexer.h) shared by the statement parser
// (jinja/parser.cc) and the expression parser (jinja/expression_parser.h): peeking, consuming,
// expecting, and errors in Jinja2's words that name the origin and the line. It also counts
// how deeply the parsers are nested, so that no template can exhaust the stack of the parser
// or the renderer. One per parse, on one thread.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "jinja/lexer.h"

namespace pdserve::jinja {

class TokenStream {
 public:
  // Nesting deeper than this (brackets, `not`, unary signs, blocks) is refused.
  static constexpr int kMaxNesting = 300;

  // `tokens` ends with kEof.
  TokenStream(std::vector<Token> tokens, std::string_view origin)
      : tokens_(std::move(tokens)), origin_(origin) {}

  const Token& Current() const { return tokens_[pos_]; }
  const Token& Look() const { return tokens_[std::min(pos_ + 1, tokens_.size() - 1)]; }
  // Returns the current token and moves past it (never past kEof).
  const Token& Next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  static bool IsName(const Token& t, std::string_view name) {
    return t.type == TokenType::kName && t.value == name;
  }
  static bool IsOp(const Token& t, std::string_view op) {
    return t.type == TokenType::kOperator && t.value == op;
  }
  bool SkipName(std::string_view name) {
    if (!IsName(Current(), name)) return false;
    Next();
    return true;
  }
  bool SkipOp(std::string_view op) {
    if (!IsOp(Current(), op)) return false;
    Next();
    return true;
  }

  // How Jinja2 names a token in errors: "'endfor'", "end of template".
  static std::string Describe(const Token& t);
  // InvalidArgument "ORIGIN:LINE: message", at `line` or else the current token's.
  Status Fail(const std::string& message, int line = 0) const;
  Status ExpectOp(std::string_view op);
  Status ExpectBlockEnd();
  Result<std::string> ExpectName();

  // Counts one level of nesting for as long as it lives.
  class Nesting {
   public:
    explicit Nesting(TokenStream& stream) : depth_(stream.depth_) { ++depth_; }
    ~Nesting() { --depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;
    bool too_deep() const { return depth_ > kMaxNesting; }

   private:
    int& depth_;
  };

 private:
  std::vector<Token> tokens_;
  std::string_view origin_;
  size_t pos_ = 0;
  int depth_ = 0;  // Nesting levels open
};

}  // namespace pdserve::jinja
