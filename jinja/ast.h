// The parsed form of a Jinja template: expressions (Expr) and statements (Stmt), built by the
// parser (jinja/parser.h) and walked by the renderer (jinja/renderer.h). Immutable after
// parsing: safe to share between threads that render concurrently.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace pdserve::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<const Expr>;

struct CallArguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
};

struct Expr {
  enum class Kind {
    kConst,     // constant
    kName,      // name
    kList,      // items
    kTuple,     // items
    kDict,      // items: key, value, key, value ...
    kGetAttr,   // object.name
    kGetItem,   // object[items[0]]
    kSlice,     // items: start, stop, step (null when absent); only as kGetItem's key
    kCall,      // object(arguments)
    kFilter,    // object|name(arguments); object is null in `{% filter %}` and `{% set x | f %}`
    kTest,      // object is name(arguments)
    kUnary,     // name ("-" or "+") object
    kNot,       // not object
    kBinary,    // items[0] name items[1]: "+", "-", "*", "/", "//", "%", "**"
    kConcat,    // items joined with ~
    kCompare,   // items[0] operators[0] items[1] operators[1] items[2] ...
    kAnd,       // items[0] and items[1]
    kOr,        // items[0] or items[1]
    kCondExpr,  // items[1] if items[0] else items[2] (items[2] null without else)
  };
  Kind kind = Kind::kConst;
  int line = 1;
  Value constant;
  std::string name;
  ExprPtr object;
  std::vector<ExprPtr> items;
  std::vector<std::string> operators;  // "==", "!=", "<", "<=", ">", ">=", "in", "notin"
  CallArguments arguments;
};

// Where a for loop or a set statement stores values: a name, or a tuple to unpack into.
struct Target {
  std::string name;           // empty for a tuple
  std::vector<Target> items;  // a tuple's targets
};

struct Stmt;
using StmtList = std::vector<std::unique_ptr<const Stmt>>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // if expr: body, else: else_body (an elif is an kIf alone in else_body)
    kFor,          // for target in expr [if condition]: body, else: else_body
    kSet,          // set target = expr, or set namespace_name.name = expr
    kSetBlock,     // set target [| expr filter chain]: body rendered to a string
    kMacro,        // macro name(parameters): body
    kBreak,        //
    kContinue,     //
    kWith,         // with assignments: body
    kFilterBlock,  // filter expr: body rendered, then filtered
    kScope,        // body as is (Hugging Face's {% generation %})
  };
  Kind kind = Kind::kText;
  int line = 1;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  Target target;
  std::string namespace_name;
  StmtList body;
  StmtList else_body;

  // Macros.
  std::string name;
  std::vector<std::string> parameters;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() parameters
  bool catches_varargs = false;   // the body names `varargs`
  bool catches_kwargs = false;    // the body names `kwargs`

  // with.
  std::vector<std::pair<Target, ExprPtr>> assignments;
};

}  // namespace pdserve::jinja
