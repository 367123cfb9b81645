#include "jinja/operations.h"

#include <cmath>
#include <string>

#include "jinja/methods.h"
#include "jinja/python_str.h"
#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

// Jinja2's object_type_repr: "dict object", or "None".
std::string ObjectTypeRepr(const Value& object) {
  if (object.is_none()) return "None";
  std::string_view type = object.TypeName();
  if (object.is_namespace()) return "jinja2.utils.Namespace object";
  if (object.is_loop()) return "jinja2.runtime.LoopContext object";
  return std::string(type) + " object";
}

Value MissingAttribute(const Value& object, std::string_view name) {
  return Value::Undefined(py::Repr(ObjectTypeRepr(object)) + " has no attribute " + py::Repr(name));
}

Value MissingElement(const Value& object, const Value& key) {
  return Value::Undefined(ObjectTypeRepr(object) + " has no element " + Repr(key));
}

Status TypeError(std::string message) { return InvalidArgument(std::move(message)); }

Status UnsupportedOperands(std::string_view op, const Value& a, const Value& b) {
  return TypeError("unsupported operand type(s) for " + std::string(op) + ": '" +
                   std::string(a.TypeName()) + "' and '" + std::string(b.TypeName()) + "'");
}

Status Overflow() {
  return InvalidArgument("integer overflow (the template engine's integers are 64-bit)");
}

Value Repeat(const Value& sequence_or_string, int64_t times) {
  if (sequence_or_string.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence_or_string.string();
    return Value::String(std::move(out));
  }
  const Sequence& s = sequence_or_string.sequence();
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i) items.insert(items.end(), s.items.begin(), s.items.end());
  return Value::MakeSequence(std::make_shared<const Sequence>(Sequence{s.kind, std::move(items)}));
}

Result<Value> IntPower(int64_t base, int64_t exponent) {
  if (exponent < 0) {
    if (base == 0) return InvalidArgument("0.0 cannot be raised to a negative power");
    return Value::Float(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
  int64_t result = 1;
  while (exponent > 0) {
    if (exponent & 1) {
      if (__builtin_mul_overflow(result, base, &result)) return Overflow();
    }
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
  }
  return Value::Int(result);
}

Result<Value> Arithmetic(std::string_view op, const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t x = a.int_value(), y = b.int_value(), r = 0;
    if (op == "+") {
      if (__builtin_add_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "-") {
      if (__builtin_sub_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "*") {
      if (__builtin_mul_overflow(x, y, &r)) return Overflow();
      return Value::Int(r);
    }
    if (op == "/") {
      if (y == 0) return InvalidArgument("division by zero");
      return Value::Float(static_cast<double>(x) / static_cast<double>(y));
    }
    if (op == "//" || op == "%") {
      if (y == 0) {
        return InvalidArgument(op == "%" ? "integer division or modulo by zero"
                                         : "integer division or modulo by zero");
      }
      if (x == INT64_MIN && y == -1) return Overflow();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        q -= 1;
        m += y;
      }
      return Value::Int(op == "//" ? q : m);
    }
    if (op == "**") return IntPower(x, y);
  }
  double x = a.float_value(), y = b.float_value();
  if (op == "+") return Value::Float(x + y);
  if (op == "-") return Value::Float(x - y);
  if (op == "*") return Value::Float(x * y);
  if (op == "/") {
    if (y == 0) return InvalidArgument("float division by zero");
    return Value::Float(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0) return InvalidArgument(op == "%" ? "float modulo" : "float floor division by zero");
    double mod = std::fmod(x, y);
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) mod += y;
    } else {
      mod = std::copysign(0.0, y);
    }
    if (op == "%") return Value::Float(mod);
    double div = (x - mod) / y;
    double floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, x / y);
    }
    return Value::Float(floordiv);
  }
  if (op == "**") {
    if (x == 0 && y < 0) return InvalidArgument("0.0 cannot be raised to a negative power");
    if (x < 0 && y != std::floor(y)) {
      return Unimplemented("a negative number to a fractional power (a complex number)");
    }
    return Value::Float(std::pow(x, y));
  }
  return UnsupportedOperands(op, a, b);
}

// Python's comparison of two ordered scalars (numbers with numbers, strings with strings).
Result<bool> CompareScalars(std::string_view op, const Value& a, const Value& b) {
  int order;
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) {
      order = a.int_value() < b.int_value() ? -1 : a.int_value() > b.int_value() ? 1 : 0;
    } else {
      double x = a.float_value(), y = b.float_value();
      if (std::isnan(x) || std::isnan(y)) return false;
      order = x < y ? -1 : x > y ? 1 : 0;
    }
  } else if (a.is_string() && b.is_string()) {
    int c = a.string().compare(b.string());  // UTF-8 byte order is code point order
    order = c < 0 ? -1 : c > 0 ? 1 : 0;
  } else {
    return TypeError(std::string("'").append(op) + "' not supported between instances of '" +
                     std::string(a.TypeName()) + "' and '" + std::string(b.TypeName()) + "'");
  }
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

}  // namespace

Status UndefinedError(const Value& undefined) {
  const std::string& hint = undefined.string();
  return InvalidArgument(hint.empty() ? "undefined value" : hint);
}

std::optional<size_t> NormalizeIndex(int64_t index, size_t length) {
  auto n = static_cast<int64_t>(length);
  if (index < 0) index += n;
  if (index < 0 || index >= n) return std::nullopt;
  return static_cast<size_t>(index);
}

bool Truthy(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return false;
    case Value::Kind::kBool:
      return value.bool_value();
    case Value::Kind::kInt:
      return value.int_value() != 0;
    case Value::Kind::kFloat:
      return value.float_value() != 0;
    case Value::Kind::kString:
      return !value.string().empty();
    case Value::Kind::kSequence:
      return value.sequence().kind == SequenceKind::kIterator || !value.sequence().items.empty();
    case Value::Kind::kDict:
      return !value.dict().empty();
    case Value::Kind::kNamespace:
    case Value::Kind::kCallable:
    case Value::Kind::kLoop:
      return true;
  }
  return false;
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integral() && b.is_integral()) return a.int_value() == b.int_value();
    return a.float_value() == b.float_value();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.string() == b.string();
    case Value::Kind::kSequence: {
      const Sequence& x = a.sequence();
      const Sequence& y = b.sequence();
      if (x.kind == SequenceKind::kIterator || y.kind == SequenceKind::kIterator) {
        return a.sequence_ptr() == b.sequence_ptr();
      }
      if (x.kind != y.kind || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!Equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.size() != y.size()) return false;
      for (const auto& [key, value] : x.entries()) {
        const Value* other = y.Find(key);
        if (other == nullptr || !Equals(value, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.namespace_attributes() == &b.namespace_attributes();
    case Value::Kind::kCallable:
      return &a.callable() == &b.callable();
    case Value::Kind::kLoop:
      return a.loop_ptr() == b.loop_ptr();
    default:
      return false;
  }
}

Result<bool> Compare(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_list_or_tuple() && b.is_list_or_tuple() && a.sequence().kind == b.sequence().kind) {
    const auto& x = a.sequence().items;
    const auto& y = b.sequence().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Compare(op, x[i], y[i]);
    }
    return CompareScalars(op, Value::Int(static_cast<int64_t>(x.size())),
                          Value::Int(static_cast<int64_t>(y.size())));
  }
  return CompareScalars(op, a, b);
}

Result<bool> Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return TypeError("'in <string>' requires string as left operand, not " +
                         std::string(item.TypeName()));
      }
      return container.string().find(item.string()) != std::string::npos;
    case Value::Kind::kSequence:
      for (const Value& v : container.sequence().items) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (item.is_sequence() || item.is_dict() || item.is_namespace()) {
        return TypeError("unhashable type: '" + std::string(item.TypeName()) + "'");
      }
      return item.is_string() && container.dict().Find(item.string()) != nullptr;
    default:
      return TypeError("argument of type '" + std::string(container.TypeName()) +
                       "' is not iterable");
  }
}

Result<Value> BinaryOp(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) return Arithmetic(op, a, b);
  if (op == "+") {
    if (a.is_string() && b.is_string()) return Value::String(a.string() + b.string());
    if (a.is_list_or_tuple() && b.is_list_or_tuple() && a.sequence().kind == b.sequence().kind) {
      std::vector<Value> items = a.sequence().items;
      items.insert(items.end(), b.sequence().items.begin(), b.sequence().items.end());
      return Value::MakeSequence(
          std::make_shared<const Sequence>(Sequence{a.sequence().kind, std::move(items)}));
    }
    if (a.is_string() || a.is_list_or_tuple()) {
      return TypeError("can only concatenate " + std::string(a.TypeName()) + " (not \"" +
                       std::string(b.TypeName()) + "\") to " + std::string(a.TypeName()));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list_or_tuple()) && b.is_integral()) {
      return Repeat(a, b.int_value());
    }
    if ((b.is_string() || b.is_list_or_tuple()) && a.is_integral()) {
      return Repeat(b, a.int_value());
    }
  }
  if (op == "%" && a.is_string()) {
    return Unimplemented("printf-style formatting with % is not supported");
  }
  return UnsupportedOperands(op, a, b);
}

Result<Value> UnaryOp(std::string_view op, const Value& operand) {
  if (operand.is_undefined()) return UndefinedError(operand);
  if (operand.is_integral()) {
    if (op == "+") return Value::Int(operand.int_value());
    if (operand.int_value() == INT64_MIN) return Overflow();
    return Value::Int(-operand.int_value());
  }
  if (operand.is_float()) {
    return Value::Float(op == "+" ? operand.float_value() : -operand.float_value());
  }
  return TypeError("bad operand type for unary " + std::string(op) + ": '" +
                   std::string(operand.TypeName()) + "'");
}

Result<int64_t> Length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(py::Length(value.string()));
    case Value::Kind::kSequence:
      if (value.sequence().kind == SequenceKind::kIterator) break;
      return static_cast<int64_t>(value.sequence().items.size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(value.dict().size());
    case Value::Kind::kLoop:
      return static_cast<int64_t>(value.loop().items->items.size());
    default:
      break;
  }
  return TypeError("object of type '" + std::string(value.TypeName()) + "' has no len()");
}

Result<std::vector<Value>> Iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
      return std::vector<Value>{};
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (char32_t c : py::Decode(value.string())) {
        std::string s;
        py::AppendUtf8(c, s);
        chars.push_back(Value::String(std::move(s)));
      }
      return chars;
    }
    case Value::Kind::kSequence:
      return value.sequence().items;
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      keys.reserve(value.dict().size());
      for (const auto& entry : value.dict().entries()) keys.push_back(Value::String(entry.first));
      return keys;
    }
    default:
      break;
  }
  return TypeError(std::string("'").append(value.TypeName()) + "' object is not iterable");
}

Result<Value> GetAttr(const Value& object, std::string_view name) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(object);
    case Value::Kind::kDict:
      if (auto method = FindMethod(object, name)) return *method;
      if (const Value* v = object.dict().Find(name)) return *v;
      break;
    case Value::Kind::kNamespace:
      if (const Value* v = object.namespace_attributes().Find(name)) return *v;
      break;
    default:
      if (auto method = FindMethod(object, name)) return *method;
      break;
  }
  return MissingAttribute(object, name);
}

Result<Value> GetItem(const Value& object, const Value& key) {
  switch (object.kind()) {
    case Value::Kind::kUndefined:
      return UndefinedError(object);
    case Value::Kind::kDict:
      if (key.is_string()) {
        if (const Value* v = object.dict().Find(key.string())) return *v;
      }
      break;
    case Value::Kind::kSequence:
      if (key.is_integral() && object.sequence().kind != SequenceKind::kIterator) {
        const auto& items = object.sequence().items;
        if (auto i = NormalizeIndex(key.int_value(), items.size())) return items[*i];
        return MissingElement(object, key);
      }
      break;
    case Value::Kind::kString:
      if (key.is_integral()) {
        std::u32string text = py::Decode(object.string());
        if (auto i = NormalizeIndex(key.int_value(), text.size())) {
          std::string c;
          py::AppendUtf8(text[*i], c);
          return Value::String(std::move(c));
        }
        return MissingElement(object, key);
      }
      break;
    default:
      break;
  }
  // Jinja2 falls back to the attribute when the key is a string.
  if (key.is_string()) {
    if (object.is_namespace()) {
      if (const Value* v = object.namespace_attributes().Find(key.string())) return *v;
    } else if (auto method = FindMethod(object, key.string())) {
      return *method;
    }
    return MissingAttribute(object, key.string());
  }
  return MissingElement(object, key);
}

Result<Value> GetSlice(const Value& object, const Value& start, const Value& stop,
                       const Value& step) {
  if (object.is_undefined()) return UndefinedError(object);
  const bool is_string = object.is_string();
  if (!is_string && !object.is_list_or_tuple()) {
    return Value::Undefined(ObjectTypeRepr(object) + " has no element slice");
  }
  for (const Value* bound : {&start, &stop, &step}) {
    if (!bound->is_undefined() && !bound->is_none() && !bound->is_integral()) {
      return Value::Undefined("slice indices must be integers or None");
    }
  }
  auto given = [](const Value& v) { return !v.is_undefined() && !v.is_none(); };
  int64_t s = given(step) ? step.int_value() : 1;
  if (s == 0) return InvalidArgument("slice step cannot be zero");
  std::u32string text;
  int64_t length;
  if (is_string) {
    text = py::Decode(object.string());
    length = static_cast<int64_t>(text.size());
  } else {
    length = static_cast<int64_t>(object.sequence().items.size());
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](const Value& bound, int64_t absent) {
    if (!given(bound)) return absent;
    int64_t i = bound.int_value();
    if (i < 0) {
      i += length;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= length) {
      i = s < 0 ? length - 1 : length;
    }
    return i;
  };
  int64_t begin = adjust(start, s < 0 ? length - 1 : 0);
  int64_t end = adjust(stop, s < 0 ? -1 : length);
  std::vector<int64_t> picks;
  for (int64_t i = begin; s > 0 ? i < end : i > end; i += s) picks.push_back(i);
  if (is_string) {
    std::string out;
    for (int64_t i : picks) py::AppendUtf8(text[i], out);
    return Value::String(std::move(out));
  }
  std::vector<Value> items;
  items.reserve(picks.size());
  for (int64_t i : picks) items.push_back(object.sequence().items[i]);
  return Value::MakeSequence(
      std::make_shared<const Sequence>(Sequence{object.sequence().kind, std::move(items)}));
}

}  // namespace pdserve::jinja
