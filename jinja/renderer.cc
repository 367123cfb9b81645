#include "jinja/renderer.h"

#include <utility>

#include "jinja/filters.h"
#include "jinja/operations.h"
#include "jinja/predicates.h"
#include "jinja/python_str.h"
#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

// Nested macro calls deeper than this fail, where Python would hit its recursion limit.
constexpr int kMaxCallDepth = 200;

}  // namespace

Renderer::Renderer(std::string_view origin, const Dict& variables, const Dict& globals)
    : origin_(origin), variables_(variables), globals_(globals) {}

Result<std::string> Renderer::Render(const StmtList& body) {
  auto root = std::make_shared<Scope>();
  std::string out;
  Flow flow = Flow::kNormal;
  PDSERVE_RETURN_IF_ERROR(Exec(body, root, out, flow));
  return out;
}

Status Renderer::Error(int line, const std::string& message) const {
  return InvalidArgument(origin_ + ":" + std::to_string(line) + ": " + message);
}

Status Renderer::AtLine(int line, const Status& status) const {
  return Error(line, status.message());
}

Status Renderer::Exec(const StmtList& body, const ScopePtr& scope, std::string& out, Flow& flow) {
  for (const auto& stmt : body) {
    PDSERVE_RETURN_IF_ERROR(ExecStmt(*stmt, scope, out, flow));
    if (flow != Flow::kNormal) return Status::Ok();
  }
  return Status::Ok();
}

Status Renderer::ExecStmt(const Stmt& stmt, const ScopePtr& scope, std::string& out, Flow& flow) {
  switch (stmt.kind) {
    case Stmt::Kind::kText:
      out += stmt.text;
      return Status::Ok();
    case Stmt::Kind::kOutput: {
      PDSERVE_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr, scope));
      out += Str(value);
      return Status::Ok();
    }
    case Stmt::Kind::kIf: {
      PDSERVE_ASSIGN_OR_RETURN(Value test, Eval(*stmt.expr, scope));
      return Exec(Truthy(test) ? stmt.body : stmt.else_body, scope, out, flow);
    }
    case Stmt::Kind::kFor:
      return ExecFor(stmt, scope, out);
    case Stmt::Kind::kSet:
      return ExecSet(stmt, scope);
    case Stmt::Kind::kSetBlock: {
      PDSERVE_ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, scope));
      Value value = Value::String(std::move(text));
      if (stmt.expr) {
        PDSERVE_ASSIGN_OR_RETURN(value, EvalFilter(*stmt.expr, scope, &value));
      }
      return Assign(stmt.target, value, *scope, stmt.line);
    }
    case Stmt::Kind::kMacro:
      return DefineMacro(stmt, scope);
    case Stmt::Kind::kBreak:
      flow = Flow::kBreak;
      return Status::Ok();
    case Stmt::Kind::kContinue:
      flow = Flow::kContinue;
      return Status::Ok();
    case Stmt::Kind::kWith: {
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      for (const auto& [target, expr] : stmt.assignments) {
        PDSERVE_ASSIGN_OR_RETURN(Value value, Eval(*expr, scope));
        PDSERVE_RETURN_IF_ERROR(Assign(target, value, *inner, stmt.line));
      }
      return Exec(stmt.body, inner, out, flow);
    }
    case Stmt::Kind::kFilterBlock: {
      PDSERVE_ASSIGN_OR_RETURN(std::string text, Capture(stmt.body, scope));
      Value input = Value::String(std::move(text));
      PDSERVE_ASSIGN_OR_RETURN(Value value, EvalFilter(*stmt.expr, scope, &input));
      out += Str(value);
      return Status::Ok();
    }
    case Stmt::Kind::kScope:
      return Exec(stmt.body, scope, out, flow);
  }
  return Status::Ok();
}

Status Renderer::ExecFor(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  PDSERVE_ASSIGN_OR_RETURN(Value iterable, Eval(*stmt.expr, scope));
  auto iterated = Iterate(iterable);
  if (!iterated.ok()) return AtLine(stmt.line, iterated.status());
  std::vector<Value> items = std::move(iterated).value();
  if (stmt.condition) {  // `for x in y if cond`: the loop sees only what passes
    std::vector<Value> kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>();
      probe->parent = scope;
      PDSERVE_RETURN_IF_ERROR(Assign(stmt.target, item, *probe, stmt.line));
      PDSERVE_ASSIGN_OR_RETURN(Value pass, Eval(*stmt.condition, probe));
      if (Truthy(pass)) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    Flow flow = Flow::kNormal;
    return Exec(stmt.else_body, scope, out, flow);
  }
  auto loop = std::make_shared<LoopState>();
  loop->items = std::make_shared<const Sequence>(Sequence{SequenceKind::kList, std::move(items)});
  const Value loop_value = Value::Loop(loop);
  for (size_t i = 0; i < loop->items->items.size(); ++i) {
    loop->index0 = i;
    auto iteration = std::make_shared<Scope>();
    iteration->parent = scope;
    iteration->variables["loop"] = loop_value;
    PDSERVE_RETURN_IF_ERROR(Assign(stmt.target, loop->items->items[i], *iteration, stmt.line));
    Flow flow = Flow::kNormal;
    PDSERVE_RETURN_IF_ERROR(Exec(stmt.body, iteration, out, flow));
    if (flow == Flow::kBreak) break;
  }
  return Status::Ok();
}

Status Renderer::ExecSet(const Stmt& stmt, const ScopePtr& scope) {
  PDSERVE_ASSIGN_OR_RETURN(Value value, Eval(*stmt.expr, scope));
  if (stmt.namespace_name.empty()) return Assign(stmt.target, value, *scope, stmt.line);
  PDSERVE_ASSIGN_OR_RETURN(Value ns, Lookup(stmt.namespace_name, *scope));
  if (!ns.is_namespace()) {
    return Error(stmt.line, "cannot assign attribute on non-namespace object");
  }
  ns.namespace_attributes().Set(stmt.target.name, std::move(value));
  return Status::Ok();
}

Status Renderer::Assign(const Target& target, const Value& value, Scope& scope, int line) const {
  if (!target.name.empty()) {
    scope.variables[target.name] = value;
    return Status::Ok();
  }
  auto items = Iterate(value);
  if (!items.ok()) {
    return Error(line, "cannot unpack non-iterable " + std::string(value.TypeName()) + " object");
  }
  const size_t want = target.items.size();
  if (items->size() > want) {
    return Error(line, "too many values to unpack (expected " + std::to_string(want) + ")");
  }
  if (items->size() < want) {
    return Error(line, "not enough values to unpack (expected " + std::to_string(want) + ", got " +
                           std::to_string(items->size()) + ")");
  }
  for (size_t i = 0; i < want; ++i) {
    PDSERVE_RETURN_IF_ERROR(Assign(target.items[i], (*items)[i], scope, line));
  }
  return Status::Ok();
}

Status Renderer::DefineMacro(const Stmt& stmt, const ScopePtr& scope) {
  std::weak_ptr<Scope> closure = scope;
  const Stmt* macro = &stmt;
  scope->variables[stmt.name] = Value::Function(
      stmt.name,
      [this, macro, closure](const Arguments& args) -> Result<Value> {
        ScopePtr defined_in = closure.lock();
        if (!defined_in) {
          return Error(macro->line, "macro '" + macro->name + "' called after its scope ended");
        }
        return CallMacro(*macro, defined_in, args);
      },
      CallableKind::kMacro);
  return Status::Ok();
}

Result<Value> Renderer::CallMacro(const Stmt& macro, const ScopePtr& closure,
                                  const Arguments& args) {
  const size_t count = macro.parameters.size();
  if (args.positional.size() > count && !macro.catches_varargs) {
    return Error(macro.line, "macro '" + macro.name + "' takes not more than " +
                                 std::to_string(count) + " argument(s)");
  }
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  std::vector<bool> given(count, false);
  for (size_t i = 0; i < count && i < args.positional.size(); ++i) {
    scope->variables[macro.parameters[i]] = args.positional[i];
    given[i] = true;
  }
  Dict extra_keywords;
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < count && macro.parameters[i] != name) ++i;
    if (i < count && !given[i]) {
      scope->variables[name] = value;
      given[i] = true;
    } else if (macro.catches_kwargs && i == count) {
      extra_keywords.Set(name, value);
    } else {
      return Error(macro.line,
                   "macro '" + macro.name + "' takes no keyword argument '" + name + "'");
    }
  }
  const size_t first_default = count - macro.defaults.size();
  for (size_t i = 0; i < count; ++i) {
    if (given[i]) continue;
    if (i >= first_default) {
      PDSERVE_ASSIGN_OR_RETURN(scope->variables[macro.parameters[i]],
                               Eval(*macro.defaults[i - first_default], scope));
    } else {
      scope->variables[macro.parameters[i]] =
          Value::Undefined("parameter '" + macro.parameters[i] + "' was not provided");
    }
  }
  if (macro.catches_varargs) {
    std::vector<Value> rest;
    for (size_t i = count; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->variables["varargs"] = Value::Tuple(std::move(rest));
  }
  if (macro.catches_kwargs) scope->variables["kwargs"] = Value::MakeDict(std::move(extra_keywords));
  if (call_depth_ >= kMaxCallDepth) {
    return Error(macro.line, "maximum recursion depth exceeded calling macro '" + macro.name + "'");
  }
  ++call_depth_;
  std::string out;
  Flow flow = Flow::kNormal;
  Status status = Exec(macro.body, scope, out, flow);
  --call_depth_;
  PDSERVE_RETURN_IF_ERROR(status);
  return Value::String(std::move(out));
}

Result<std::string> Renderer::Capture(const StmtList& body, const ScopePtr& scope) {
  auto inner = std::make_shared<Scope>();
  inner->parent = scope;
  std::string out;
  Flow flow = Flow::kNormal;
  PDSERVE_RETURN_IF_ERROR(Exec(body, inner, out, flow));
  return out;
}

Result<Value> Renderer::Lookup(const std::string& name, const Scope& scope) const {
  for (const Scope* s = &scope; s != nullptr; s = s->parent.get()) {
    auto it = s->variables.find(name);
    if (it != s->variables.end()) return it->second;
  }
  if (const Value* v = variables_.Find(name)) return *v;
  if (const Value* v = globals_.Find(name)) return *v;
  return Value::Undefined(py::Repr(name) + " is undefined");
}

Result<Arguments> Renderer::EvalArguments(const CallArguments& arguments, const ScopePtr& scope) {
  Arguments args;
  args.positional.reserve(arguments.positional.size());
  for (const auto& e : arguments.positional) {
    PDSERVE_ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [name, e] : arguments.keyword) {
    PDSERVE_ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
    args.keyword.emplace_back(name, std::move(v));
  }
  return args;
}

Result<Value> Renderer::EvalFilter(const Expr& expr, const ScopePtr& scope, const Value* input) {
  Value subject;
  if (expr.object == nullptr) {
    subject = input != nullptr ? *input : Value();
  } else if (expr.object->kind == Expr::Kind::kFilter) {
    PDSERVE_ASSIGN_OR_RETURN(subject, EvalFilter(*expr.object, scope, input));
  } else {
    PDSERVE_ASSIGN_OR_RETURN(subject, Eval(*expr.object, scope));
  }
  PDSERVE_ASSIGN_OR_RETURN(Arguments args, EvalArguments(expr.arguments, scope));
  auto result = ApplyFilter(expr.name, subject, args);
  if (!result.ok()) return AtLine(expr.line, result.status());
  return result;
}

Result<Value> Renderer::EvalCompare(const Expr& expr, const ScopePtr& scope) {
  PDSERVE_ASSIGN_OR_RETURN(Value left, Eval(*expr.items[0], scope));
  for (size_t i = 0; i < expr.operators.size(); ++i) {
    PDSERVE_ASSIGN_OR_RETURN(Value right, Eval(*expr.items[i + 1], scope));
    const std::string& op = expr.operators[i];
    Result<bool> holds = false;
    if (op == "==") {
      holds = Equals(left, right);
    } else if (op == "!=") {
      holds = !Equals(left, right);
    } else if (op == "in" || op == "notin") {
      holds = Contains(right, left);
      if (holds.ok() && op == "notin") holds = !*holds;
    } else {
      holds = Compare(op, left, right);
    }
    if (!holds.ok()) return AtLine(expr.line, holds.status());
    if (!*holds) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Result<Value> Renderer::EvalCall(const Expr& expr, const ScopePtr& scope) {
  PDSERVE_ASSIGN_OR_RETURN(Value callee, Eval(*expr.object, scope));
  if (callee.is_undefined()) return AtLine(expr.line, UndefinedError(callee));
  if (callee.is_loop()) {
    return Error(expr.line, "recursive loops are not supported by pdserve's template engine");
  }
  if (!callee.is_callable()) {
    return Error(expr.line,
                 std::string("'").append(callee.TypeName()) + "' object is not callable");
  }
  PDSERVE_ASSIGN_OR_RETURN(Arguments args, EvalArguments(expr.arguments, scope));
  const Callable& callable = callee.callable();
  Result<Value> result = callable.function(args);
  if (!result.ok() && callable.kind == CallableKind::kBuiltin) {
    return AtLine(expr.line, result.status());
  }
  return result;
}

Result<Value> Renderer::Eval(const Expr& expr, const ScopePtr& scope) {
  switch (expr.kind) {
    case Expr::Kind::kConst:
      return expr.constant;
    case Expr::Kind::kName:
      return Lookup(expr.name, *scope);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      items.reserve(expr.items.size());
      for (const auto& e : expr.items) {
        PDSERVE_ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
        items.push_back(std::move(v));
      }
      return expr.kind == Expr::Kind::kList ? Value::List(std::move(items))
                                            : Value::Tuple(std::move(items));
    }
    case Expr::Kind::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < expr.items.size(); i += 2) {
        PDSERVE_ASSIGN_OR_RETURN(Value key, Eval(*expr.items[i], scope));
        PDSERVE_ASSIGN_OR_RETURN(Value value, Eval(*expr.items[i + 1], scope));
        if (!key.is_string()) {
          return Error(expr.line, "dict keys other than strings are not supported (got " +
                                      std::string(key.TypeName()) + ")");
        }
        dict.Set(key.string(), std::move(value));
      }
      return Value::MakeDict(std::move(dict));
    }
    case Expr::Kind::kGetAttr: {
      PDSERVE_ASSIGN_OR_RETURN(Value object, Eval(*expr.object, scope));
      auto result = GetAttr(object, expr.name);
      if (!result.ok()) return AtLine(expr.line, result.status());
      return result;
    }
    case Expr::Kind::kGetItem: {
      PDSERVE_ASSIGN_OR_RETURN(Value object, Eval(*expr.object, scope));
      const Expr& key = *expr.items[0];
      Result<Value> result = Value();
      if (key.kind == Expr::Kind::kSlice) {
        Value bounds[3];
        for (int i = 0; i < 3; ++i) {
          if (key.items[i]) {
            PDSERVE_ASSIGN_OR_RETURN(bounds[i], Eval(*key.items[i], scope));
          } else {
            bounds[i] = Value::None();
          }
        }
        result = GetSlice(object, bounds[0], bounds[1], bounds[2]);
      } else {
        PDSERVE_ASSIGN_OR_RETURN(Value k, Eval(key, scope));
        result = GetItem(object, k);
      }
      if (!result.ok()) return AtLine(expr.line, result.status());
      return result;
    }
    case Expr::Kind::kSlice:
      return Error(expr.line, "a slice outside of [...]");
    case Expr::Kind::kCall:
      return EvalCall(expr, scope);
    case Expr::Kind::kFilter:
      return EvalFilter(expr, scope, nullptr);
    case Expr::Kind::kTest: {
      PDSERVE_ASSIGN_OR_RETURN(Value subject, Eval(*expr.object, scope));
      PDSERVE_ASSIGN_OR_RETURN(Arguments args, EvalArguments(expr.arguments, scope));
      auto result = ApplyTest(expr.name, subject, args);
      if (!result.ok()) return AtLine(expr.line, result.status());
      return Value::Bool(*result);
    }
    case Expr::Kind::kUnary: {
      PDSERVE_ASSIGN_OR_RETURN(Value operand, Eval(*expr.object, scope));
      auto result = UnaryOp(expr.name, operand);
      if (!result.ok()) return AtLine(expr.line, result.status());
      return result;
    }
    case Expr::Kind::kNot: {
      PDSERVE_ASSIGN_OR_RETURN(Value operand, Eval(*expr.object, scope));
      return Value::Bool(!Truthy(operand));
    }
    case Expr::Kind::kBinary: {
      PDSERVE_ASSIGN_OR_RETURN(Value left, Eval(*expr.items[0], scope));
      PDSERVE_ASSIGN_OR_RETURN(Value right, Eval(*expr.items[1], scope));
      auto result = BinaryOp(expr.name, left, right);
      if (!result.ok()) return AtLine(expr.line, result.status());
      return result;
    }
    case Expr::Kind::kConcat: {
      std::string text;
      for (const auto& e : expr.items) {
        PDSERVE_ASSIGN_OR_RETURN(Value v, Eval(*e, scope));
        text += Str(v);
      }
      return Value::String(std::move(text));
    }
    case Expr::Kind::kCompare:
      return EvalCompare(expr, scope);
    case Expr::Kind::kAnd:
    case Expr::Kind::kOr: {
      PDSERVE_ASSIGN_OR_RETURN(Value left, Eval(*expr.items[0], scope));
      if (Truthy(left) == (expr.kind == Expr::Kind::kOr)) return left;
      return Eval(*expr.items[1], scope);
    }
    case Expr::Kind::kCondExpr: {
      PDSERVE_ASSIGN_OR_RETURN(Value test, Eval(*expr.items[0], scope));
      if (Truthy(test)) return Eval(*expr.items[1], scope);
      if (expr.items[2]) return Eval(*expr.items[2], scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(expr.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Error(expr.line, "unknown expression");
}

}  // namespace pdserve::jinja
