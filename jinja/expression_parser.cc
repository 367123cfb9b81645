#include "jinja/expression_parser.h"

#include <utility>
#include <vector>

#include "jinja/filters.h"
#include "jinja/predicates.h"
#include "jinja/python_str.h"

namespace pdserve::jinja {
namespace {

std::unique_ptr<Expr> NewExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

}  // namespace

Result<Target> ExpressionParser::ParseTargetPrimary() {
  if (ts_.SkipOp("(")) {
    PDSERVE_ASSIGN_OR_RETURN(Target inner, ParseTargetTuple({}));
    PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(")"));
    return inner;
  }
  if (ts_.Current().type != TokenType::kName) {
    return ts_.Fail("can't assign to " + ts_.Describe(ts_.Current()));
  }
  const std::string& name = ts_.Current().value;
  if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
      name == "None") {
    return ts_.Fail("can't assign to 'const'");
  }
  Target t;
  t.name = ts_.Next().value;
  return t;
}

Result<Target> ExpressionParser::ParseTargetTuple(
    std::initializer_list<std::string_view> extra_end) {
  Target tuple;
  bool is_tuple = false;
  while (true) {
    if (!tuple.items.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    PDSERVE_ASSIGN_OR_RETURN(Target item, ParseTargetPrimary());
    tuple.items.push_back(std::move(item));
    if (!ts_.IsOp(ts_.Current(), ",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (tuple.items.empty())
      return ts_.Fail("Expected an expression, got " + ts_.Describe(ts_.Current()));
    return std::move(tuple.items[0]);
  }
  return tuple;
}

bool ExpressionParser::IsTupleEnd(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = ts_.Current();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || ts_.IsOp(t, ")")) {
    return true;
  }
  for (std::string_view name : extra_end) {
    if (ts_.IsName(t, name)) return true;
  }
  return false;
}

Result<ExprPtr> ExpressionParser::ParseTuple(bool simplified, bool with_condexpr,
                                             std::initializer_list<std::string_view> extra_end,
                                             bool explicit_parentheses) {
  const int line = ts_.Current().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
    if (IsTupleEnd(extra_end)) break;
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr item,
                             simplified ? ParsePrimary() : ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (!ts_.IsOp(ts_.Current(), ",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) {
      return ts_.Fail("Expected an expression, got " + ts_.Describe(ts_.Current()));
    }
  }
  auto tuple = NewExpr(Expr::Kind::kTuple, line);
  tuple->items = std::move(items);
  return ExprPtr(std::move(tuple));
}

Result<ExprPtr> ExpressionParser::ParseExpression(bool with_condexpr) {
  return with_condexpr ? ParseCondExpr() : ParseOr();
}

Result<ExprPtr> ExpressionParser::ParseCondExpr() {
  const int line = ts_.Current().line;
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
  while (ts_.SkipName("if")) {
    auto cond = NewExpr(Expr::Kind::kCondExpr, line);
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr test, ParseOr());
    ExprPtr otherwise;
    if (ts_.SkipName("else")) {
      PDSERVE_ASSIGN_OR_RETURN(otherwise, ParseCondExpr());
    }
    cond->items.push_back(std::move(test));
    cond->items.push_back(std::move(expr));
    cond->items.push_back(std::move(otherwise));
    expr = std::move(cond);
  }
  return expr;
}

Result<ExprPtr> ExpressionParser::ParseOr() {
  TokenStream::Nesting nesting(ts_);
  if (nesting.too_deep()) return ts_.Fail("the expression nests too deeply");
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr left, ParseAnd());
  while (ts_.IsName(ts_.Current(), "or")) {
    const int line = ts_.Next().line;
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr right, ParseAnd());
    auto e = NewExpr(Expr::Kind::kOr, line);
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(right));
    left = std::move(e);
  }
  return left;
}

Result<ExprPtr> ExpressionParser::ParseAnd() {
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr left, ParseNot());
  while (ts_.IsName(ts_.Current(), "and")) {
    const int line = ts_.Next().line;
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr right, ParseNot());
    auto e = NewExpr(Expr::Kind::kAnd, line);
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(right));
    left = std::move(e);
  }
  return left;
}

Result<ExprPtr> ExpressionParser::ParseNot() {
  TokenStream::Nesting nesting(ts_);
  if (nesting.too_deep()) return ts_.Fail("the expression nests too deeply");
  if (ts_.IsName(ts_.Current(), "not")) {
    auto e = NewExpr(Expr::Kind::kNot, ts_.Next().line);
    PDSERVE_ASSIGN_OR_RETURN(e->object, ParseNot());
    return ExprPtr(std::move(e));
  }
  return ParseCompare();
}

Result<ExprPtr> ExpressionParser::ParseCompare() {
  const int line = ts_.Current().line;
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
  auto compare = NewExpr(Expr::Kind::kCompare, line);
  compare->items.push_back(std::move(first));
  while (true) {
    const Token& t = ts_.Current();
    std::string op;
    if (t.type == TokenType::kOperator && (t.value == "==" || t.value == "!=" || t.value == "<" ||
                                           t.value == "<=" || t.value == ">" || t.value == ">=")) {
      op = ts_.Next().value;
    } else if (ts_.SkipName("in")) {
      op = "in";
    } else if (ts_.IsName(t, "not") && ts_.IsName(ts_.Look(), "in")) {
      ts_.Next();
      ts_.Next();
      op = "notin";
    } else {
      break;
    }
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr operand, ParseMath1());
    compare->operators.push_back(std::move(op));
    compare->items.push_back(std::move(operand));
  }
  if (compare->operators.empty()) return std::move(compare->items[0]);
  return ExprPtr(std::move(compare));
}

Result<ExprPtr> ExpressionParser::Binary(std::string op, ExprPtr left, ExprPtr right, int line) {
  auto e = NewExpr(Expr::Kind::kBinary, line);
  e->name = std::move(op);
  e->items.push_back(std::move(left));
  e->items.push_back(std::move(right));
  return ExprPtr(std::move(e));
}

Result<ExprPtr> ExpressionParser::ParseMath1() {
  const int line = ts_.Current().line;
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr left, ParseConcat());
  while (ts_.IsOp(ts_.Current(), "+") || ts_.IsOp(ts_.Current(), "-")) {
    const char* op = ts_.Next().value == "+" ? "+" : "-";
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr right, ParseConcat());
    PDSERVE_ASSIGN_OR_RETURN(left, Binary(op, std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::ParseConcat() {
  const int line = ts_.Current().line;
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr first, ParseMath2());
  if (!ts_.IsOp(ts_.Current(), "~")) return first;
  auto concat = NewExpr(Expr::Kind::kConcat, line);
  concat->items.push_back(std::move(first));
  while (ts_.SkipOp("~")) {
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr next, ParseMath2());
    concat->items.push_back(std::move(next));
  }
  return ExprPtr(std::move(concat));
}

Result<ExprPtr> ExpressionParser::ParseMath2() {
  const int line = ts_.Current().line;
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr left, ParsePow());
  while (true) {
    const Token& t = ts_.Current();
    const char* op = ts_.IsOp(t, "*")    ? "*"
                     : ts_.IsOp(t, "/")  ? "/"
                     : ts_.IsOp(t, "//") ? "//"
                     : ts_.IsOp(t, "%")  ? "%"
                                         : nullptr;
    if (op == nullptr) break;
    ts_.Next();
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr right, ParsePow());
    PDSERVE_ASSIGN_OR_RETURN(left, Binary(op, std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::ParsePow() {
  const int line = ts_.Current().line;
  PDSERVE_ASSIGN_OR_RETURN(ExprPtr left, ParseUnary(true));
  while (ts_.SkipOp("**")) {
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr right, ParseUnary(true));
    PDSERVE_ASSIGN_OR_RETURN(left, Binary("**", std::move(left), std::move(right), line));
  }
  return left;
}

Result<ExprPtr> ExpressionParser::ParseUnary(bool with_filter) {
  TokenStream::Nesting nesting(ts_);
  if (nesting.too_deep()) return ts_.Fail("the expression nests too deeply");
  const Token& t = ts_.Current();
  ExprPtr node;
  if (ts_.IsOp(t, "-") || ts_.IsOp(t, "+")) {
    auto e = NewExpr(Expr::Kind::kUnary, t.line);
    e->name = ts_.Next().value;
    PDSERVE_ASSIGN_OR_RETURN(e->object, ParseUnary(false));
    node = std::move(e);
  } else {
    PDSERVE_ASSIGN_OR_RETURN(node, ParsePrimary());
  }
  PDSERVE_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
  if (with_filter) {
    PDSERVE_ASSIGN_OR_RETURN(node, ParseFilterExpr(std::move(node)));
  }
  return node;
}

Result<ExprPtr> ExpressionParser::ParsePrimary() {
  const Token& t = ts_.Current();
  switch (t.type) {
    case TokenType::kName: {
      std::unique_ptr<Expr> e;
      if (t.value == "true" || t.value == "True" || t.value == "false" || t.value == "False") {
        e = NewExpr(Expr::Kind::kConst, t.line);
        e->constant = Value::Bool(t.value[0] == 't' || t.value[0] == 'T');
      } else if (t.value == "none" || t.value == "None") {
        e = NewExpr(Expr::Kind::kConst, t.line);
        e->constant = Value::None();
      } else {
        e = NewExpr(Expr::Kind::kName, t.line);
        e->name = t.value;
      }
      ts_.Next();
      return ExprPtr(std::move(e));
    }
    case TokenType::kString: {
      auto e = NewExpr(Expr::Kind::kConst, t.line);
      std::string text = ts_.Next().value;
      while (ts_.Current().type == TokenType::kString) text += ts_.Next().value;  // 'a' 'b'
      e->constant = Value::String(std::move(text));
      return ExprPtr(std::move(e));
    }
    case TokenType::kInteger: {
      auto e = NewExpr(Expr::Kind::kConst, t.line);
      e->constant = Value::Int(ts_.Next().integer);
      return ExprPtr(std::move(e));
    }
    case TokenType::kFloat: {
      auto e = NewExpr(Expr::Kind::kConst, t.line);
      e->constant = Value::Float(ts_.Next().number);
      return ExprPtr(std::move(e));
    }
    case TokenType::kOperator:
      if (t.value == "(") {
        ts_.Next();
        PDSERVE_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(false, true, {}, true));
        PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(")"));
        return inner;
      }
      if (t.value == "[") return ParseList();
      if (t.value == "{") return ParseDict();
      break;
    default:
      break;
  }
  return ts_.Fail("unexpected " + ts_.Describe(t));
}

Result<ExprPtr> ExpressionParser::ParseList() {
  auto e = NewExpr(Expr::Kind::kList, ts_.Next().line);
  while (!ts_.IsOp(ts_.Current(), "]")) {
    if (!e->items.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
    if (ts_.IsOp(ts_.Current(), "]")) break;
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
    e->items.push_back(std::move(item));
  }
  PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp("]"));
  return ExprPtr(std::move(e));
}

Result<ExprPtr> ExpressionParser::ParseDict() {
  auto e = NewExpr(Expr::Kind::kDict, ts_.Next().line);
  while (!ts_.IsOp(ts_.Current(), "}")) {
    if (!e->items.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
    if (ts_.IsOp(ts_.Current(), "}")) break;
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
    PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(":"));
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
    e->items.push_back(std::move(key));
    e->items.push_back(std::move(value));
  }
  PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp("}"));
  return ExprPtr(std::move(e));
}

Result<ExprPtr> ExpressionParser::ParsePostfix(ExprPtr node) {
  while (true) {
    if (ts_.IsOp(ts_.Current(), ".") || ts_.IsOp(ts_.Current(), "[")) {
      PDSERVE_ASSIGN_OR_RETURN(node, ParseSubscript(std::move(node)));
    } else if (ts_.IsOp(ts_.Current(), "(")) {
      PDSERVE_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExpressionParser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (ts_.IsOp(ts_.Current(), "|")) {
      PDSERVE_ASSIGN_OR_RETURN(node, ParseFilterChain(std::move(node), false));
    } else if (ts_.IsName(ts_.Current(), "is")) {
      PDSERVE_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
    } else if (ts_.IsOp(ts_.Current(), "(")) {
      PDSERVE_ASSIGN_OR_RETURN(node, ParseCall(std::move(node)));
    } else {
      return node;
    }
  }
}

Result<ExprPtr> ExpressionParser::ParseSubscript(ExprPtr node) {
  const Token& token = ts_.Next();
  if (token.value == ".") {
    const Token& attribute = ts_.Current();
    if (attribute.type == TokenType::kName) {
      auto e = NewExpr(Expr::Kind::kGetAttr, token.line);
      e->object = std::move(node);
      e->name = ts_.Next().value;
      return ExprPtr(std::move(e));
    }
    if (attribute.type != TokenType::kInteger) return ts_.Fail("expected name or number");
    auto key = NewExpr(Expr::Kind::kConst, attribute.line);
    key->constant = Value::Int(ts_.Next().integer);
    auto e = NewExpr(Expr::Kind::kGetItem, token.line);
    e->object = std::move(node);
    e->items.push_back(std::move(key));
    return ExprPtr(std::move(e));
  }
  std::vector<ExprPtr> args;
  while (!ts_.IsOp(ts_.Current(), "]")) {
    if (!args.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr arg, ParseSubscribed());
    args.push_back(std::move(arg));
  }
  PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp("]"));
  auto e = NewExpr(Expr::Kind::kGetItem, token.line);
  e->object = std::move(node);
  if (args.size() == 1) {
    e->items.push_back(std::move(args[0]));
  } else {
    auto tuple = NewExpr(Expr::Kind::kTuple, token.line);
    tuple->items = std::move(args);
    e->items.push_back(std::move(tuple));
  }
  return ExprPtr(std::move(e));
}

Result<ExprPtr> ExpressionParser::ParseSubscribed() {
  const int line = ts_.Current().line;
  std::vector<ExprPtr> bounds;
  if (ts_.IsOp(ts_.Current(), ":")) {
    ts_.Next();
    bounds.push_back(nullptr);
  } else {
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr node, ParseExpression(true));
    if (!ts_.IsOp(ts_.Current(), ":")) return node;
    ts_.Next();
    bounds.push_back(std::move(node));
  }
  auto slice_end = [&] { return ts_.IsOp(ts_.Current(), "]") || ts_.IsOp(ts_.Current(), ","); };
  if (ts_.IsOp(ts_.Current(), ":") || slice_end()) {
    bounds.push_back(nullptr);
  } else {
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr stop, ParseExpression(true));
    bounds.push_back(std::move(stop));
  }
  if (ts_.SkipOp(":") && !slice_end()) {
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr step, ParseExpression(true));
    bounds.push_back(std::move(step));
  } else {
    bounds.push_back(nullptr);
  }
  auto e = NewExpr(Expr::Kind::kSlice, line);
  e->items = std::move(bounds);
  return ExprPtr(std::move(e));
}

Status ExpressionParser::ParseCallArguments(CallArguments& arguments) {
  const int line = ts_.Current().line;
  PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp("("));
  bool require_comma = false;
  while (!ts_.IsOp(ts_.Current(), ")")) {
    if (require_comma) {
      PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
      if (ts_.IsOp(ts_.Current(), ")")) break;
    }
    if (ts_.IsOp(ts_.Current(), "*") || ts_.IsOp(ts_.Current(), "**")) {
      return ts_.Fail("*args and **kwargs in calls are not supported by pdserve's template engine");
    }
    if (ts_.Current().type == TokenType::kName && ts_.IsOp(ts_.Look(), "=")) {
      std::string key = ts_.Next().value;
      ts_.Next();
      PDSERVE_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      arguments.keyword.emplace_back(std::move(key), std::move(value));
    } else {
      if (!arguments.keyword.empty()) {
        return ts_.Fail("invalid syntax for function call expression", line);
      }
      PDSERVE_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      arguments.positional.push_back(std::move(value));
    }
    require_comma = true;
  }
  ts_.Next();
  return Status::Ok();
}

Result<ExprPtr> ExpressionParser::ParseCall(ExprPtr node) {
  auto e = NewExpr(Expr::Kind::kCall, ts_.Current().line);
  e->object = std::move(node);
  PDSERVE_RETURN_IF_ERROR(ParseCallArguments(e->arguments));
  return ExprPtr(std::move(e));
}

Status ExpressionParser::CheckFilter(const std::string& name, int line) const {
  if (FindFilter(name) != nullptr) return Status::Ok();
  if (IsUnsupportedJinjaFilter(name)) {
    return ts_.Fail("the '" + name + "' filter is not supported by pdserve's template engine",
                    line);
  }
  return ts_.Fail("No filter named " + py::Repr(name) + ".", line);
}

// `|name(args)|name ...`; `start_inline`: the first filter has no `|` (`{% filter f %}`).
Result<ExprPtr> ExpressionParser::ParseFilterChain(ExprPtr node, bool start_inline) {
  while (ts_.IsOp(ts_.Current(), "|") || start_inline) {
    if (!start_inline) ts_.Next();
    start_inline = false;
    const int line = ts_.Current().line;
    PDSERVE_ASSIGN_OR_RETURN(std::string name, ts_.ExpectName());
    while (ts_.SkipOp(".")) {
      PDSERVE_ASSIGN_OR_RETURN(std::string part, ts_.ExpectName());
      name += "." + part;
    }
    PDSERVE_RETURN_IF_ERROR(CheckFilter(name, line));
    auto e = NewExpr(Expr::Kind::kFilter, line);
    e->object = std::move(node);
    e->name = std::move(name);
    if (ts_.IsOp(ts_.Current(), "(")) PDSERVE_RETURN_IF_ERROR(ParseCallArguments(e->arguments));
    node = std::move(e);
  }
  return node;
}

Result<ExprPtr> ExpressionParser::ParseTest(ExprPtr node) {
  const int line = ts_.Next().line;  // is
  const bool negated = ts_.SkipName("not");
  PDSERVE_ASSIGN_OR_RETURN(std::string name, ts_.ExpectName());
  while (ts_.SkipOp(".")) {
    PDSERVE_ASSIGN_OR_RETURN(std::string part, ts_.ExpectName());
    name += "." + part;
  }
  if (FindTest(name) == nullptr) return ts_.Fail("No test named " + py::Repr(name) + ".", line);
  auto e = NewExpr(Expr::Kind::kTest, line);
  e->object = std::move(node);
  e->name = std::move(name);
  const Token& t = ts_.Current();
  if (ts_.IsOp(t, "(")) {
    PDSERVE_RETURN_IF_ERROR(ParseCallArguments(e->arguments));
  } else if ((t.type == TokenType::kName || t.type == TokenType::kString ||
              t.type == TokenType::kInteger || t.type == TokenType::kFloat || ts_.IsOp(t, "[") ||
              ts_.IsOp(t, "{")) &&
             !ts_.IsName(t, "else") && !ts_.IsName(t, "or") && !ts_.IsName(t, "and")) {
    if (ts_.IsName(t, "is")) return ts_.Fail("You cannot chain multiple tests with is");
    PDSERVE_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
    PDSERVE_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
    e->arguments.positional.push_back(std::move(arg));
  }
  if (!negated) return ExprPtr(std::move(e));
  auto n = NewExpr(Expr::Kind::kNot, line);
  n->object = std::move(e);
  return ExprPtr(std::move(n));
}

}  // namespace pdserve::jinja
