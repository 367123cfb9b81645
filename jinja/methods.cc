#include "jinja/methods.h"

#include <string>
#include <vector>

#include "jinja/operations.h"
#include "jinja/python_str.h"
#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

using Bound = std::vector<std::optional<Value>>;

Status TypeError(std::string message) { return InvalidArgument(std::move(message)); }

bool Given(const std::optional<Value>& v) { return v && !v->is_none() && !v->is_undefined(); }

// A str argument that may be absent or None.
Result<std::optional<std::string>> OptionalString(const std::optional<Value>& v,
                                                  std::string_view method) {
  if (!Given(v)) return std::optional<std::string>();
  if (!v->is_string()) {
    return TypeError(std::string(method) + " arg must be None or str, not " +
                     std::string(v->TypeName()));
  }
  return std::optional<std::string>(v->string());
}

Result<std::string> RequiredString(const std::optional<Value>& v, std::string_view method) {
  if (!v) return TypeError(std::string(method) + "() missing a required argument");
  if (!v->is_string()) {
    return TypeError(std::string(method) + "() argument must be str, not " +
                     std::string(v->TypeName()));
  }
  return v->string();
}

Result<std::optional<int64_t>> OptionalInt(const std::optional<Value>& v, std::string_view method) {
  if (!Given(v)) return std::optional<int64_t>();
  if (!v->is_integral()) {
    return TypeError(std::string(method) + "() argument must be an integer, not " +
                     std::string(v->TypeName()));
  }
  return std::optional<int64_t>(v->int_value());
}

// Binds, then runs `body` with the bound arguments.
template <typename Body>
Value Method(const Value& self, std::string_view name,
             std::initializer_list<std::string_view> params, Body body) {
  std::string full = std::string(self.TypeName()) + "." + std::string(name);
  std::vector<std::string_view> names(params);
  return Value::Function(full, [self, full, names, body](const Arguments& args) -> Result<Value> {
    PDSERVE_ASSIGN_OR_RETURN(Bound bound, BindArguments(full, args, names));
    return body(self, bound);
  });
}

Value Unsafe(const Value& self, std::string_view name) {
  return Value::Undefined("access to attribute " + py::Repr(name) + " of " +
                          py::Repr(self.TypeName()) + " object is unsafe.");
}

// str.startswith / str.endswith.
Result<Value> AffixTest(const Value& self, const Bound& a, bool prefix) {
  std::string_view method = prefix ? "startswith" : "endswith";
  std::vector<std::string> candidates;
  if (!a[0]) return TypeError(std::string(method) + "() takes at least 1 argument (0 given)");
  if (a[0]->is_string()) {
    candidates.push_back(a[0]->string());
  } else if (a[0]->is_list_or_tuple() && a[0]->sequence().kind == SequenceKind::kTuple) {
    for (const Value& v : a[0]->sequence().items) {
      if (!v.is_string()) {
        return TypeError("tuple for " + std::string(method) + " must only contain str, not " +
                         std::string(v.TypeName()));
      }
      candidates.push_back(v.string());
    }
  } else {
    return TypeError(std::string(method) + " first arg must be str or a tuple of str, not " +
                     std::string(a[0]->TypeName()));
  }
  PDSERVE_ASSIGN_OR_RETURN(auto start, OptionalInt(a[1], method));
  PDSERVE_ASSIGN_OR_RETURN(auto end, OptionalInt(a[2], method));
  std::string text = self.string();
  if (start || end) {
    PDSERVE_ASSIGN_OR_RETURN(Value window,
                             GetSlice(self, start ? Value::Int(*start) : Value::None(),
                                      end ? Value::Int(*end) : Value::None(), Value::None()));
    // Python: a start past the end never matches, even an empty affix.
    if (start && *start > static_cast<int64_t>(py::Length(text))) return Value::Bool(false);
    text = window.string();
  }
  for (const std::string& c : candidates) {
    bool match =
        prefix ? text.compare(0, c.size(), c) == 0 && text.size() >= c.size()
               : text.size() >= c.size() && text.compare(text.size() - c.size(), c.size(), c) == 0;
    if (match) return Value::Bool(true);
  }
  return Value::Bool(false);
}

std::optional<Value> StringMethod(const Value& self, std::string_view name) {
  auto strip = [&](bool left, bool right) {
    return Method(
        self, name, {"chars"},
        [method = std::string(name), left, right](const Value& s, const Bound& a) -> Result<Value> {
          PDSERVE_ASSIGN_OR_RETURN(auto chars, OptionalString(a[0], method));
          return Value::String(py::Strip(s.string(), chars, left, right));
        });
  };
  if (name == "strip") return strip(true, true);
  if (name == "lstrip") return strip(true, false);
  if (name == "rstrip") return strip(false, true);
  if (name == "split" || name == "rsplit") {
    const bool right = name == "rsplit";
    return Method(self, name, {"sep", "maxsplit"},
                  [right](const Value& s, const Bound& a) -> Result<Value> {
                    PDSERVE_ASSIGN_OR_RETURN(auto sep, OptionalString(a[0], "split"));
                    PDSERVE_ASSIGN_OR_RETURN(auto maxsplit, OptionalInt(a[1], "split"));
                    PDSERVE_ASSIGN_OR_RETURN(
                        auto parts, py::Split(s.string(), sep, maxsplit.value_or(-1), right));
                    std::vector<Value> items;
                    for (auto& p : parts) items.push_back(Value::String(std::move(p)));
                    return Value::List(std::move(items));
                  });
  }
  if (name == "splitlines") {
    return Method(self, name, {"keepends"}, [](const Value& s, const Bound& a) -> Result<Value> {
      std::vector<Value> items;
      for (auto& line : py::SplitLines(s.string(), a[0] && Truthy(*a[0]))) {
        items.push_back(Value::String(std::move(line)));
      }
      return Value::List(std::move(items));
    });
  }
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return Method(self, name, {"prefix", "start", "end"},
                  [prefix](const Value& s, const Bound& a) { return AffixTest(s, a, prefix); });
  }
  using Transform = std::string (*)(std::string_view);
  Transform transform = name == "lower"        ? &py::Lower
                        : name == "casefold"   ? &py::Lower
                        : name == "upper"      ? &py::Upper
                        : name == "title"      ? &py::Title
                        : name == "capitalize" ? &py::Capitalize
                        : name == "swapcase"   ? &py::SwapCase
                                               : nullptr;
  if (transform != nullptr) {
    return Method(self, name, {}, [transform](const Value& s, const Bound&) -> Result<Value> {
      return Value::String(transform(s.string()));
    });
  }
  using Predicate = bool (*)(std::string_view);
  Predicate predicate = name == "isdigit"     ? &py::IsDigitString
                        : name == "isdecimal" ? &py::IsDigitString
                        : name == "isnumeric" ? &py::IsDigitString
                        : name == "isalpha"   ? &py::IsAlphaString
                        : name == "isalnum"   ? &py::IsAlnumString
                        : name == "isspace"   ? &py::IsSpaceString
                        : name == "islower"   ? &py::IsLowerString
                        : name == "isupper"   ? &py::IsUpperString
                                              : nullptr;
  if (predicate != nullptr) {
    return Method(self, name, {}, [predicate](const Value& s, const Bound&) -> Result<Value> {
      return Value::Bool(predicate(s.string()));
    });
  }
  if (name == "replace") {
    return Method(self, name, {"old", "new", "count"},
                  [](const Value& s, const Bound& a) -> Result<Value> {
                    PDSERVE_ASSIGN_OR_RETURN(std::string old, RequiredString(a[0], "replace"));
                    PDSERVE_ASSIGN_OR_RETURN(std::string neu, RequiredString(a[1], "replace"));
                    PDSERVE_ASSIGN_OR_RETURN(auto count, OptionalInt(a[2], "replace"));
                    return Value::String(py::Replace(s.string(), old, neu, count.value_or(-1)));
                  });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const bool right = name[0] == 'r';
    const bool raises = name.find("index") != std::string_view::npos;
    return Method(self, name, {"sub", "start", "end"},
                  [right, raises](const Value& s, const Bound& a) -> Result<Value> {
                    PDSERVE_ASSIGN_OR_RETURN(std::string sub, RequiredString(a[0], "find"));
                    PDSERVE_ASSIGN_OR_RETURN(auto start, OptionalInt(a[1], "find"));
                    PDSERVE_ASSIGN_OR_RETURN(auto end, OptionalInt(a[2], "find"));
                    int64_t at = py::Find(s.string(), sub, start, end, right);
                    if (at < 0 && raises) return InvalidArgument("substring not found");
                    return Value::Int(at);
                  });
  }
  if (name == "count") {
    return Method(self, name, {"sub"}, [](const Value& s, const Bound& a) -> Result<Value> {
      PDSERVE_ASSIGN_OR_RETURN(std::string sub, RequiredString(a[0], "count"));
      return Value::Int(py::Count(s.string(), sub));
    });
  }
  if (name == "join") {
    return Method(self, name, {"iterable"}, [](const Value& s, const Bound& a) -> Result<Value> {
      if (!a[0]) return TypeError("str.join() takes exactly one argument (0 given)");
      PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(*a[0]));
      std::string out;
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
          return TypeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                           std::string(items[i].TypeName()) + " found");
        }
        if (i > 0) out += s.string();
        out += items[i].string();
      }
      return Value::String(std::move(out));
    });
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    const int where = name == "center" ? 0 : name == "ljust" ? -1 : 1;
    return Method(self, name, {"width", "fillchar"},
                  [where](const Value& s, const Bound& a) -> Result<Value> {
                    PDSERVE_ASSIGN_OR_RETURN(auto width, OptionalInt(a[0], "center"));
                    if (!width) return TypeError("center() takes at least 1 argument");
                    char32_t fill = ' ';
                    if (a[1]) {
                      PDSERVE_ASSIGN_OR_RETURN(std::string f, RequiredString(a[1], "center"));
                      std::u32string chars = py::Decode(f);
                      if (chars.size() != 1) {
                        return TypeError("The fill character must be exactly one character long");
                      }
                      fill = chars[0];
                    }
                    return Value::String(py::Pad(s.string(), *width, fill, where));
                  });
  }
  if (name == "zfill") {
    return Method(self, name, {"width"}, [](const Value& s, const Bound& a) -> Result<Value> {
      PDSERVE_ASSIGN_OR_RETURN(auto width, OptionalInt(a[0], "zfill"));
      const std::string& text = s.string();
      bool sign = !text.empty() && (text[0] == '+' || text[0] == '-');
      std::string padded = py::Pad(text.substr(sign), width.value_or(0) - sign, '0', 1);
      return Value::String(sign ? text[0] + padded : padded);
    });
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const bool prefix = name == "removeprefix";
    return Method(self, name, {"affix"}, [prefix](const Value& s, const Bound& a) -> Result<Value> {
      PDSERVE_ASSIGN_OR_RETURN(std::string affix, RequiredString(a[0], "removeprefix"));
      std::string_view text = s.string();
      if (prefix && text.substr(0, affix.size()) == affix) text.remove_prefix(affix.size());
      if (!prefix && text.size() >= affix.size() &&
          text.substr(text.size() - affix.size()) == affix) {
        text.remove_suffix(affix.size());
      }
      return Value::String(std::string(text));
    });
  }
  if (name == "partition" || name == "rpartition") {
    const bool right = name == "rpartition";
    return Method(self, name, {"sep"}, [right](const Value& s, const Bound& a) -> Result<Value> {
      PDSERVE_ASSIGN_OR_RETURN(std::string sep, RequiredString(a[0], "partition"));
      if (sep.empty()) return InvalidArgument("empty separator");
      const std::string& text = s.string();
      size_t at = right ? text.rfind(sep) : text.find(sep);
      if (at == std::string::npos) {
        return right ? Value::Tuple({Value::String(""), Value::String(""), s})
                     : Value::Tuple({s, Value::String(""), Value::String("")});
      }
      return Value::Tuple({Value::String(text.substr(0, at)), Value::String(sep),
                           Value::String(text.substr(at + sep.size()))});
    });
  }
  if (name == "format" || name == "format_map") {
    return Method(self, name, {}, [](const Value&, const Bound&) -> Result<Value> {
      return Unimplemented("str.format is not supported by this template engine");
    });
  }
  return std::nullopt;
}

std::optional<Value> DictMethod(const Value& self, std::string_view name) {
  if (name == "items" || name == "keys" || name == "values") {
    const char which = name[0];
    return Method(self, name, {}, [which](const Value& d, const Bound&) -> Result<Value> {
      std::vector<Value> items;
      for (const auto& [key, value] : d.dict().entries()) {
        if (which == 'i') {
          items.push_back(Value::Tuple({Value::String(key), value}));
        } else {
          items.push_back(which == 'k' ? Value::String(key) : value);
        }
      }
      return Value::List(std::move(items));
    });
  }
  if (name == "get") {
    return Method(self, name, {"key", "default"},
                  [](const Value& d, const Bound& a) -> Result<Value> {
                    if (!a[0]) return TypeError("get expected at least 1 argument, got 0");
                    if (a[0]->is_string()) {
                      if (const Value* v = d.dict().Find(a[0]->string())) return *v;
                    } else if (a[0]->is_sequence() || a[0]->is_dict()) {
                      return TypeError("unhashable type: '" + std::string(a[0]->TypeName()) + "'");
                    }
                    return a[1] ? *a[1] : Value::None();
                  });
  }
  if (name == "copy") {
    return Method(self, name, {}, [](const Value& d, const Bound&) -> Result<Value> { return d; });
  }
  if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
      name == "update") {
    return Unsafe(self, name);
  }
  return std::nullopt;
}

std::optional<Value> SequenceMethod(const Value& self, std::string_view name) {
  if (self.sequence().kind == SequenceKind::kIterator) return std::nullopt;
  if (name == "count" || name == "index") {
    const bool count = name == "count";
    return Method(self, name, {"value"}, [count](const Value& s, const Bound& a) -> Result<Value> {
      if (!a[0]) return TypeError("takes exactly one argument (0 given)");
      const auto& items = s.sequence().items;
      int64_t n = 0;
      for (size_t i = 0; i < items.size(); ++i) {
        if (Equals(items[i], *a[0])) {
          if (!count) return Value::Int(static_cast<int64_t>(i));
          ++n;
        }
      }
      if (!count) return InvalidArgument(Repr(*a[0]) + " is not in list");
      return Value::Int(n);
    });
  }
  if (self.sequence().kind == SequenceKind::kTuple) return std::nullopt;
  if (name == "copy") {
    return Method(self, name, {}, [](const Value& s, const Bound&) -> Result<Value> {
      return Value::List(s.sequence().items);
    });
  }
  if (name == "append" || name == "reverse" || name == "insert" || name == "sort" ||
      name == "extend" || name == "remove") {
    return Unsafe(self, name);
  }
  if (name == "pop" || name == "clear") {
    return Method(self, name, {"index"},
                  [name = std::string(name)](const Value&, const Bound&) -> Result<Value> {
                    return Unimplemented("list." + name + "() changes a list; not supported");
                  });
  }
  return std::nullopt;
}

std::optional<Value> LoopAttribute(const Value& self, std::string_view name) {
  const std::shared_ptr<LoopState>& loop = self.loop_ptr();
  const auto& items = loop->items->items;
  const auto length = static_cast<int64_t>(items.size());
  const auto index0 = static_cast<int64_t>(loop->index0);
  if (name == "index") return Value::Int(index0 + 1);
  if (name == "index0") return Value::Int(index0);
  if (name == "revindex") return Value::Int(length - index0);
  if (name == "revindex0") return Value::Int(length - index0 - 1);
  if (name == "first") return Value::Bool(index0 == 0);
  if (name == "last") return Value::Bool(index0 + 1 == length);
  if (name == "length") return Value::Int(length);
  if (name == "depth") return Value::Int(loop->depth0 + 1);
  if (name == "depth0") return Value::Int(loop->depth0);
  if (name == "previtem") {
    if (index0 == 0) return Value::Undefined("there is no previous item");
    return items[index0 - 1];
  }
  if (name == "nextitem") {
    if (index0 + 1 >= length) return Value::Undefined("there is no next item");
    return items[index0 + 1];
  }
  if (name == "cycle") {
    return Value::Function("loop.cycle", [loop](const Arguments& args) -> Result<Value> {
      if (args.positional.empty()) return TypeError("no items for cycling given");
      return args.positional[loop->index0 % args.positional.size()];
    });
  }
  if (name == "changed") {
    return Value::Function("loop.changed", [loop](const Arguments& args) -> Result<Value> {
      bool same = loop->changed_called && loop->last_changed.size() == args.positional.size();
      for (size_t i = 0; same && i < args.positional.size(); ++i) {
        same = Equals(loop->last_changed[i], args.positional[i]);
      }
      loop->changed_called = true;
      loop->last_changed = args.positional;
      return Value::Bool(!same);
    });
  }
  return std::nullopt;
}

}  // namespace

std::optional<Value> FindMethod(const Value& self, std::string_view name) {
  switch (self.kind()) {
    case Value::Kind::kString:
      return StringMethod(self, name);
    case Value::Kind::kDict:
      return DictMethod(self, name);
    case Value::Kind::kSequence:
      return SequenceMethod(self, name);
    case Value::Kind::kLoop:
      return LoopAttribute(self, name);
    default:
      return std::nullopt;
  }
}

}  // namespace pdserve::jinja
