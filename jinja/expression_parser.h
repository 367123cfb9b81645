// Jinja2's expression grammar, in its precedence order (conditional, or, and, not,
// comparisons, + -, ~, * / // %, **, unary signs, then filters and tests binding tighter than
// any operator, postfix subscripts and calls, literals), and assignment targets. Filters and
// tests are checked against the engine's lists as they are parsed, so an unknown one fails at
// load naming its line. Used by the statement parser (jinja/parser.cc) over its token stream;
// one per parse, on one thread.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "common/status.h"
#include "jinja/ast.h"
#include "jinja/token_stream.h"

namespace pdserve::jinja {

class ExpressionParser {
 public:
  explicit ExpressionParser(TokenStream& stream) : ts_(stream) {}

  // Expressions separated by commas, a tuple when there is more than one (`{{ a, b }}`), up to
  // the end of the tag, a `)` or a name in `extra_end`. `simplified`: literals and names only;
  // `with_condexpr`: `a if c else b` allowed; `explicit_parentheses`: `()` is an empty tuple.
  Result<ExprPtr> ParseTuple(bool simplified, bool with_condexpr,
                             std::initializer_list<std::string_view> extra_end,
                             bool explicit_parentheses);
  Result<ExprPtr> ParseExpression(bool with_condexpr);
  // Where a for loop or set stores values: a name or a (nested) tuple of names.
  Result<Target> ParseTargetTuple(std::initializer_list<std::string_view> extra_end);
  // `|name(args)|name ...` applied to `node`; `start_inline`: the first filter has no `|`
  // (`{% filter f %}`), and `node` may be null for a filter applied to a block's text.
  Result<ExprPtr> ParseFilterChain(ExprPtr node, bool start_inline);

 private:
  Result<Target> ParseTargetPrimary();
  bool IsTupleEnd(std::initializer_list<std::string_view> extra_end) const;
  Result<ExprPtr> ParseCondExpr();
  Result<ExprPtr> ParseOr();
  Result<ExprPtr> ParseAnd();
  Result<ExprPtr> ParseNot();
  Result<ExprPtr> ParseCompare();
  Result<ExprPtr> Binary(std::string op, ExprPtr left, ExprPtr right, int line);
  Result<ExprPtr> ParseMath1();
  Result<ExprPtr> ParseConcat();
  Result<ExprPtr> ParseMath2();
  Result<ExprPtr> ParsePow();
  Result<ExprPtr> ParseUnary(bool with_filter);
  Result<ExprPtr> ParsePrimary();
  Result<ExprPtr> ParseList();
  Result<ExprPtr> ParseDict();
  Result<ExprPtr> ParsePostfix(ExprPtr node);
  Result<ExprPtr> ParseFilterExpr(ExprPtr node);
  Result<ExprPtr> ParseSubscript(ExprPtr node);
  Result<ExprPtr> ParseSubscribed();
  Status ParseCallArguments(CallArguments& arguments);
  Result<ExprPtr> ParseCall(ExprPtr node);
  Status CheckFilter(const std::string& name, int line) const;
  Result<ExprPtr> ParseTest(ExprPtr node);

  TokenStream& ts_;
};

}  // namespace pdserve::jinja
