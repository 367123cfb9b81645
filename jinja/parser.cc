#include "jinja/parser.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "jinja/expression_parser.h"
#include "jinja/lexer.h"
#include "jinja/token_stream.h"

namespace pdserve::jinja {
namespace {

std::unique_ptr<Expr> NewExpr(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

bool ExprNames(const Expr* e, std::string_view name);

bool ArgumentsName(const CallArguments& a, std::string_view name) {
  for (const auto& p : a.positional) {
    if (ExprNames(p.get(), name)) return true;
  }
  for (const auto& [key, value] : a.keyword) {
    if (ExprNames(value.get(), name)) return true;
  }
  return false;
}

bool ExprNames(const Expr* e, std::string_view name) {
  if (e == nullptr) return false;
  if (e->kind == Expr::Kind::kName && e->name == name) return true;
  if (ExprNames(e->object.get(), name) || ArgumentsName(e->arguments, name)) return true;
  return std::any_of(e->items.begin(), e->items.end(),
                     [&](const ExprPtr& item) { return ExprNames(item.get(), name); });
}

// Does the statement list read `name` (a macro's `varargs` or `kwargs`)?
bool StmtsName(const StmtList& list, std::string_view name) {
  for (const auto& s : list) {
    if (ExprNames(s->expr.get(), name) || ExprNames(s->condition.get(), name) ||
        StmtsName(s->body, name) || StmtsName(s->else_body, name)) {
      return true;
    }
    for (const auto& d : s->defaults) {
      if (ExprNames(d.get(), name)) return true;
    }
    for (const auto& [target, value] : s->assignments) {
      if (ExprNames(value.get(), name)) return true;
    }
  }
  return false;
}

constexpr std::string_view kUnsupportedTags[] = {"block", "extends",    "include", "import",
                                                 "from",  "autoescape", "call"};

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view origin)
      : ts_(std::move(tokens), origin), expressions_(ts_) {}

  Result<StmtList> ParseTemplate() {
    StmtList body;
    PDSERVE_RETURN_IF_ERROR(Subparse({}, body));
    if (ts_.Current().type != TokenType::kEof) {
      return ts_.Fail("unexpected " + ts_.Describe(ts_.Current()));
    }
    return body;
  }

 private:
  // Parses statements until `{% END %}` for an END in `end_tags` (left as the current token,
  // after its `{%`), or the end of the template when `end_tags` is empty.
  Status Subparse(std::initializer_list<std::string_view> end_tags, StmtList& body) {
    while (ts_.Current().type != TokenType::kEof) {
      const Token& token = ts_.Current();
      if (token.type == TokenType::kData) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = token.line;
        s->text = token.value;
        body.push_back(std::move(s));
        ts_.Next();
      } else if (token.type == TokenType::kVariableBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = ts_.Next().line;
        PDSERVE_ASSIGN_OR_RETURN(s->expr, expressions_.ParseTuple(false, true, {}, false));
        if (ts_.Current().type != TokenType::kVariableEnd) {
          return ts_.Fail("expected token 'end of print statement', got " +
                          ts_.Describe(ts_.Current()));
        }
        ts_.Next();
        body.push_back(std::move(s));
      } else if (token.type == TokenType::kBlockBegin) {
        ts_.Next();
        for (std::string_view end : end_tags) {
          if (ts_.IsName(ts_.Current(), end)) return Status::Ok();
        }
        PDSERVE_RETURN_IF_ERROR(ParseStatement(body));
        PDSERVE_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
      } else {
        return ts_.Fail("unexpected " + ts_.Describe(token));
      }
    }
    if (end_tags.size() > 0) {
      std::string looking;
      for (std::string_view end : end_tags) {
        looking += (looking.empty() ? "'" : " or '") + std::string(end) + "'";
      }
      std::string message =
          "Unexpected end of template. Jinja was looking for the following tags: " + looking + ".";
      if (!tag_stack_.empty()) {
        message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
      }
      return ts_.Fail(message);
    }
    return Status::Ok();
  }

  // The body up to one of `end_tags`; leaves the end tag's name as the current token.
  Status ParseBody(std::initializer_list<std::string_view> end_tags, StmtList& body) {
    ts_.SkipOp(":");
    PDSERVE_RETURN_IF_ERROR(ts_.ExpectBlockEnd());
    return Subparse(end_tags, body);
  }

  // The body up to `{% END %}`, which is consumed up to its `%}`.
  Status ParseBodyUntil(std::string_view end, StmtList& body) {
    PDSERVE_RETURN_IF_ERROR(ParseBody({end}, body));
    ts_.Next();
    return Status::Ok();
  }

  Status ParseStatement(StmtList& body) {
    TokenStream::Nesting nesting(ts_);
    if (nesting.too_deep()) return ts_.Fail("the template nests too deeply");
    const Token& token = ts_.Current();
    if (token.type != TokenType::kName) return ts_.Fail("tag name expected");
    const std::string tag = token.value;
    const int line = token.line;
    if (std::find(std::begin(kUnsupportedTags), std::end(kUnsupportedTags), tag) !=
        std::end(kUnsupportedTags)) {
      return ts_.Fail("the '" + tag + "' tag is not supported by pdserve's template engine", line);
    }
    auto s = std::make_unique<Stmt>();
    s->line = line;
    tag_stack_.push_back(tag);
    Status status;
    if (tag == "for") {
      status = ParseFor(*s);
    } else if (tag == "if") {
      status = ParseIf(*s);
    } else if (tag == "set") {
      status = ParseSet(*s);
    } else if (tag == "macro") {
      status = ParseMacro(*s);
    } else if (tag == "with") {
      status = ParseWith(*s);
    } else if (tag == "filter") {
      status = ParseFilterBlock(*s);
    } else if (tag == "print") {
      ts_.Next();
      s->kind = Stmt::Kind::kOutput;
      status = ParsePrint(*s);
    } else if (tag == "generation") {
      ts_.Next();
      s->kind = Stmt::Kind::kScope;
      status = ParseBodyUntil("endgeneration", s->body);
    } else if (tag == "break" || tag == "continue") {
      ts_.Next();
      if (loop_depth_ == 0) {
        status = ts_.Fail("'" + tag + "' outside of a loop", line);
      }
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    } else {
      tag_stack_.pop_back();
      std::string message = "Encountered unknown tag '" + tag + "'.";
      if (!tag_stack_.empty()) {
        message += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
      }
      return ts_.Fail(message, line);
    }
    tag_stack_.pop_back();
    PDSERVE_RETURN_IF_ERROR(status);
    body.push_back(std::move(s));
    return Status::Ok();
  }

  Status ParseFor(Stmt& s) {
    s.kind = Stmt::Kind::kFor;
    ts_.Next();
    PDSERVE_ASSIGN_OR_RETURN(s.target, expressions_.ParseTargetTuple({"in"}));
    if (!ts_.SkipName("in"))
      return ts_.Fail("expected token 'in', got " + ts_.Describe(ts_.Current()));
    PDSERVE_ASSIGN_OR_RETURN(s.expr, expressions_.ParseTuple(false, false, {"recursive"}, false));
    if (ts_.SkipName("if")) {
      PDSERVE_ASSIGN_OR_RETURN(s.condition, expressions_.ParseExpression(true));
    }
    if (ts_.IsName(ts_.Current(), "recursive")) {
      return ts_.Fail("recursive loops are not supported by pdserve's template engine");
    }
    ++loop_depth_;
    Status status = ParseBody({"endfor", "else"}, s.body);
    --loop_depth_;
    PDSERVE_RETURN_IF_ERROR(status);
    if (ts_.Next().value == "else") {
      // Jinja2's `else` runs when the loop ran no iteration; break there is not in a loop.
      PDSERVE_RETURN_IF_ERROR(ParseBodyUntil("endfor", s.else_body));
    }
    return Status::Ok();
  }

  Status ParseIf(Stmt& s) {
    ts_.Next();
    return ParseElif(s);
  }

  // After `if` or `elif`: the condition, the body and the rest of the chain (an `elif` as a
  // nested if in the else branch).
  Status ParseElif(Stmt& s) {
    s.kind = Stmt::Kind::kIf;
    PDSERVE_ASSIGN_OR_RETURN(s.expr, expressions_.ParseTuple(false, false, {}, false));
    PDSERVE_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, s.body));
    const Token& token = ts_.Next();
    if (token.value == "elif") {
      auto elif = std::make_unique<Stmt>();
      elif->line = token.line;
      PDSERVE_RETURN_IF_ERROR(ParseElif(*elif));
      s.else_body.push_back(std::move(elif));
    } else if (token.value == "else") {
      PDSERVE_RETURN_IF_ERROR(ParseBodyUntil("endif", s.else_body));
    }
    return Status::Ok();
  }

  Status ParseSet(Stmt& s) {
    ts_.Next();
    if (ts_.Current().type == TokenType::kName && ts_.IsOp(ts_.Look(), ".")) {
      s.namespace_name = ts_.Next().value;
      ts_.Next();
      PDSERVE_ASSIGN_OR_RETURN(s.target.name, ts_.ExpectName());
    } else {
      PDSERVE_ASSIGN_OR_RETURN(s.target, expressions_.ParseTargetTuple({}));
    }
    if (ts_.SkipOp("=")) {
      s.kind = Stmt::Kind::kSet;
      PDSERVE_ASSIGN_OR_RETURN(s.expr, expressions_.ParseTuple(false, true, {}, false));
      return Status::Ok();
    }
    s.kind = Stmt::Kind::kSetBlock;
    if (ts_.IsOp(ts_.Current(), "|")) {
      PDSERVE_ASSIGN_OR_RETURN(s.expr, expressions_.ParseFilterChain(nullptr, false));
    }
    return ParseBodyUntil("endset", s.body);
  }

  Status ParseMacro(Stmt& s) {
    s.kind = Stmt::Kind::kMacro;
    ts_.Next();
    PDSERVE_ASSIGN_OR_RETURN(s.name, ts_.ExpectName());
    PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp("("));
    while (!ts_.IsOp(ts_.Current(), ")")) {
      if (!s.parameters.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
      PDSERVE_ASSIGN_OR_RETURN(std::string name, ts_.ExpectName());
      if (ts_.SkipOp("=")) {
        PDSERVE_ASSIGN_OR_RETURN(ExprPtr value, expressions_.ParseExpression(true));
        s.defaults.push_back(std::move(value));
      } else if (!s.defaults.empty()) {
        return ts_.Fail("non-default argument follows default argument");
      }
      s.parameters.push_back(std::move(name));
    }
    ts_.Next();
    const int saved_depth = loop_depth_;
    loop_depth_ = 0;
    Status status = ParseBodyUntil("endmacro", s.body);
    loop_depth_ = saved_depth;
    PDSERVE_RETURN_IF_ERROR(status);
    s.catches_varargs = StmtsName(s.body, "varargs");
    s.catches_kwargs = StmtsName(s.body, "kwargs");
    return Status::Ok();
  }

  Status ParseWith(Stmt& s) {
    s.kind = Stmt::Kind::kWith;
    ts_.Next();
    while (ts_.Current().type != TokenType::kBlockEnd) {
      if (!s.assignments.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
      PDSERVE_ASSIGN_OR_RETURN(Target target, expressions_.ParseTargetTuple({}));
      PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp("="));
      PDSERVE_ASSIGN_OR_RETURN(ExprPtr value, expressions_.ParseExpression(true));
      s.assignments.emplace_back(std::move(target), std::move(value));
    }
    return ParseBodyUntil("endwith", s.body);
  }

  // `{% print a, b %}` writes a then b.
  Status ParsePrint(Stmt& s) {
    auto concat = NewExpr(Expr::Kind::kConcat, s.line);
    while (ts_.Current().type != TokenType::kBlockEnd) {
      if (!concat->items.empty()) PDSERVE_RETURN_IF_ERROR(ts_.ExpectOp(","));
      PDSERVE_ASSIGN_OR_RETURN(ExprPtr item, expressions_.ParseExpression(true));
      concat->items.push_back(std::move(item));
    }
    s.expr = std::move(concat);
    return Status::Ok();
  }

  Status ParseFilterBlock(Stmt& s) {
    s.kind = Stmt::Kind::kFilterBlock;
    ts_.Next();
    PDSERVE_ASSIGN_OR_RETURN(s.expr, expressions_.ParseFilterChain(nullptr, true));
    return ParseBodyUntil("endfilter", s.body);
  }

  TokenStream ts_;
  ExpressionParser expressions_;
  int loop_depth_ = 0;  // for loops open (break and continue need one)
  std::vector<std::string> tag_stack_;
};

}  // namespace

Result<StmtList> Parse(std::string_view source, std::string_view origin) {
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(source, origin));
  return Parser(std::move(tokens), origin).ParseTemplate();
}

}  // namespace pdserve::jinja
