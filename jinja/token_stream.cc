#include "jinja/token_stream.h"

namespace pdserve::jinja {

std::string TokenStream::Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData:
      return "template data / text";
    case TokenType::kVariableBegin:
      return "'begin of print statement'";
    case TokenType::kVariableEnd:
      return "'end of print statement'";
    case TokenType::kBlockBegin:
      return "'begin of statement block'";
    case TokenType::kBlockEnd:
      return "'end of statement block'";
    case TokenType::kName:
    case TokenType::kOperator:
      return "'" + t.value + "'";
    case TokenType::kString:
      return "string";
    case TokenType::kInteger:
      return "integer";
    case TokenType::kFloat:
      return "float";
    case TokenType::kEof:
      return "end of template";
  }
  return "token";
}

Status TokenStream::Fail(const std::string& message, int line) const {
  return InvalidArgument(std::string(origin_) + ":" +
                         std::to_string(line > 0 ? line : Current().line) + ": " + message);
}

Status TokenStream::ExpectOp(std::string_view op) {
  if (SkipOp(op)) return Status::Ok();
  return Fail("expected token '" + std::string(op) + "', got " + Describe(Current()));
}

Status TokenStream::ExpectBlockEnd() {
  if (Current().type == TokenType::kBlockEnd) {
    Next();
    return Status::Ok();
  }
  return Fail("expected token 'end of statement block', got " + Describe(Current()));
}

Result<std::string> TokenStream::ExpectName() {
  if (Current().type != TokenType::kName) {
    return Fail("expected token 'name', got " + Describe(Current()));
  }
  return Next().value;
}

}  // namespace pdserve::jinja
