// Runs a parsed template (jinja/ast.h) against its variables, with Jinja2's scoping: `set` in a
// for loop's body lasts one iteration, `if` opens no scope, macros see the scope they were
// defined in, a namespace() carries values out of loops. Names resolve through the scopes, then
// the render's variables, then the globals. One Renderer per render, on one thread; it is used
// by jinja/template.cc only.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"
#include "jinja/ast.h"
#include "jinja/value.h"

namespace pdserve::jinja {

class Renderer {
 public:
  // `variables` and `globals` must outlive the renderer. Errors name `origin` and the line.
  Renderer(std::string_view origin, const Dict& variables, const Dict& globals);

  Result<std::string> Render(const StmtList& body);

 private:
  struct Scope {
    std::shared_ptr<Scope> parent;
    std::unordered_map<std::string, Value> variables;
  };
  using ScopePtr = std::shared_ptr<Scope>;
  enum class Flow { kNormal, kBreak, kContinue };

  Status Error(int line, const std::string& message) const;
  Status AtLine(int line, const Status& status) const;

  Status Exec(const StmtList& body, const ScopePtr& scope, std::string& out, Flow& flow);
  Status ExecStmt(const Stmt& stmt, const ScopePtr& scope, std::string& out, Flow& flow);
  Status ExecFor(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Status ExecSet(const Stmt& stmt, const ScopePtr& scope);
  Status DefineMacro(const Stmt& stmt, const ScopePtr& scope);
  Result<Value> CallMacro(const Stmt& macro, const ScopePtr& closure, const Arguments& args);
  // Renders `body` in a child scope of `scope` to a string (set blocks, filter blocks, macros).
  Result<std::string> Capture(const StmtList& body, const ScopePtr& scope);
  Status Assign(const Target& target, const Value& value, Scope& scope, int line) const;

  Result<Value> Eval(const Expr& expr, const ScopePtr& scope);
  Result<Value> Lookup(const std::string& name, const Scope& scope) const;
  Result<Arguments> EvalArguments(const CallArguments& arguments, const ScopePtr& scope);
  // A filter chain; the innermost filter with no object gets `input` (`{% filter %}` blocks).
  Result<Value> EvalFilter(const Expr& expr, const ScopePtr& scope, const Value* input);
  Result<Value> EvalCompare(const Expr& expr, const ScopePtr& scope);
  Result<Value> EvalCall(const Expr& expr, const ScopePtr& scope);

  std::string origin_;
  const Dict& variables_;
  const Dict& globals_;
  int call_depth_ = 0;
};

}  // namespace pdserve::jinja
