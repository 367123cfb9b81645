#include "jinja/predicates.h"

#include <string>
#include <utility>

#include "jinja/filters.h"
#include "jinja/operations.h"
#include "jinja/python_str.h"
#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

// The one argument a comparison test takes (`x is eq 3`).
Result<Value> Other(std::string_view name, const Arguments& args) {
  PDSERVE_ASSIGN_OR_RETURN(auto bound, BindArguments(name, args, {"other"}));
  if (!bound[0]) {
    return InvalidArgument(std::string(name) + "() missing 1 required positional argument");
  }
  return *bound[0];
}

Result<bool> NoArguments(std::string_view name, const Arguments& args) {
  if (!args.positional.empty() || !args.keyword.empty()) {
    return InvalidArgument("test '" + std::string(name) + "' takes no arguments");
  }
  return true;
}

Result<bool> Remainder(const Value& value, const Value& divisor, int64_t expected) {
  PDSERVE_ASSIGN_OR_RETURN(Value rest, BinaryOp("%", value, divisor));
  return Equals(rest, Value::Int(expected));
}

Result<bool> Odd(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(NoArguments("odd", a).status());
  return Remainder(v, Value::Int(2), 1);
}
Result<bool> Even(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(NoArguments("even", a).status());
  return Remainder(v, Value::Int(2), 0);
}
Result<bool> DivisibleBy(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Value num, Other("divisibleby", a));
  return Remainder(v, num, 0);
}
Result<bool> Defined(const Value& v, const Arguments&) { return !v.is_undefined(); }
Result<bool> Undefined(const Value& v, const Arguments&) { return v.is_undefined(); }
Result<bool> None(const Value& v, const Arguments&) { return v.is_none(); }
Result<bool> Boolean(const Value& v, const Arguments&) { return v.is_bool(); }
Result<bool> False(const Value& v, const Arguments&) { return v.is_bool() && !v.bool_value(); }
Result<bool> True(const Value& v, const Arguments&) { return v.is_bool() && v.bool_value(); }
Result<bool> Integer(const Value& v, const Arguments&) { return v.is_int(); }
Result<bool> Float(const Value& v, const Arguments&) { return v.is_float(); }
Result<bool> Lower(const Value& v, const Arguments&) { return py::IsLowerString(Str(v)); }
Result<bool> Upper(const Value& v, const Arguments&) { return py::IsUpperString(Str(v)); }
Result<bool> String(const Value& v, const Arguments&) { return v.is_string(); }
Result<bool> Mapping(const Value& v, const Arguments&) { return v.is_dict(); }
Result<bool> Number(const Value& v, const Arguments&) { return v.is_number(); }
// len() and [] both work: str, list, tuple, dict, and Jinja2's Undefined.
Result<bool> SequenceTest(const Value& v, const Arguments&) {
  return v.is_string() || v.is_list_or_tuple() || v.is_dict() || v.is_undefined();
}
Result<bool> Iterable(const Value& v, const Arguments&) {
  return v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined() || v.is_loop();
}
// Undefined and LoopContext define __call__ in Jinja2.
Result<bool> CallableTest(const Value& v, const Arguments&) {
  return v.is_callable() || v.is_undefined() || v.is_loop();
}
// Python's `is`: the singletons, CPython's cached small integers, shared objects.
Result<bool> SameAs(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Value other, Other("sameas", a));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return v.bool_value() == other.bool_value();
    case Value::Kind::kInt:
      return v.int_value() == other.int_value() && v.int_value() >= -5 && v.int_value() <= 256;
    case Value::Kind::kString:
      return &v.string() == &other.string();
    case Value::Kind::kSequence:
      return v.sequence_ptr() == other.sequence_ptr();
    case Value::Kind::kDict:
      return &v.dict() == &other.dict();
    default:
      return Equals(v, other);
  }
}
Result<bool> Escaped(const Value&, const Arguments&) { return false; }
Result<bool> In(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Value seq, Other("in", a));
  return Contains(seq, v);
}
Result<bool> Eq(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Value other, Other("eq", a));
  return Equals(v, other);
}
Result<bool> Ne(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Value other, Other("ne", a));
  return !Equals(v, other);
}
template <char kOp, bool kOrEqual>
Result<bool> Order(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Value other, Other("compare", a));
  std::string op(1, kOp);
  if (kOrEqual) op += '=';
  return Compare(op, v, other);
}
Result<bool> IsFilter(const Value& v, const Arguments&) {
  return v.is_string() && FindFilter(v.string()) != nullptr;
}
Result<bool> IsTest(const Value& v, const Arguments&) {
  return v.is_string() && FindTest(v.string()) != nullptr;
}

constexpr std::pair<std::string_view, TestFunction> kTests[] = {
    {"odd", Odd},
    {"even", Even},
    {"divisibleby", DivisibleBy},
    {"defined", Defined},
    {"undefined", Undefined},
    {"filter", IsFilter},
    {"test", IsTest},
    {"none", None},
    {"boolean", Boolean},
    {"false", False},
    {"true", True},
    {"integer", Integer},
    {"float", Float},
    {"lower", Lower},
    {"upper", Upper},
    {"string", String},
    {"mapping", Mapping},
    {"number", Number},
    {"sequence", SequenceTest},
    {"iterable", Iterable},
    {"callable", CallableTest},
    {"sameas", SameAs},
    {"escaped", Escaped},
    {"in", In},
    {"==", Eq},
    {"eq", Eq},
    {"equalto", Eq},
    {"!=", Ne},
    {"ne", Ne},
    {">", Order<'>', false>},
    {"gt", Order<'>', false>},
    {"greaterthan", Order<'>', false>},
    {">=", Order<'>', true>},
    {"ge", Order<'>', true>},
    {"<", Order<'<', false>},
    {"lt", Order<'<', false>},
    {"lessthan", Order<'<', false>},
    {"<=", Order<'<', true>},
    {"le", Order<'<', true>},
};

}  // namespace

TestFunction FindTest(std::string_view name) {
  for (const auto& [test_name, function] : kTests) {
    if (test_name == name) return function;
  }
  return nullptr;
}

Result<bool> ApplyTest(std::string_view name, const Value& input, const Arguments& args) {
  TestFunction test = FindTest(name);
  if (test == nullptr) return InvalidArgument("No test named " + py::Repr(name) + ".");
  return test(input, args);
}

}  // namespace pdserve::jinja
