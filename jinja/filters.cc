#include "jinja/filters.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/html_escape.h"
#include "jinja/methods.h"
#include "jinja/operations.h"
#include "jinja/python_str.h"
#include "jinja/sequence_filters.h"
#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

using Bound = std::vector<std::optional<Value>>;

bool Given(const std::optional<Value>& v) { return v && !v->is_none(); }

Value Arg(const std::optional<Value>& v, Value fallback) { return v ? *v : std::move(fallback); }

Status TypeError(std::string message) { return InvalidArgument(std::move(message)); }

Result<int64_t> IntArgument(const std::optional<Value>& v, int64_t fallback,
                            std::string_view what) {
  if (!v) return fallback;
  if (!v->is_integral()) {
    return TypeError(std::string(what) + " must be an integer, not " + std::string(v->TypeName()));
  }
  return v->int_value();
}

// Python's int(text, base) for base 0 or 2..36.
std::optional<int64_t> ParseInt(std::string_view text, int64_t base) {
  std::string s = py::Strip(text, std::nullopt, true, true);
  std::string_view v = s;
  bool negative = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    negative = v[0] == '-';
    v.remove_prefix(1);
  }
  auto has_prefix = [&](char letter) {
    return v.size() >= 2 && v[0] == '0' && (v[1] == letter || v[1] == letter - 32);
  };
  bool prefixed = false;
  if ((base == 0 || base == 16) && has_prefix('x')) {
    base = 16, prefixed = true;
  } else if ((base == 0 || base == 8) && has_prefix('o')) {
    base = 8, prefixed = true;
  } else if ((base == 0 || base == 2) && has_prefix('b')) {
    base = 2, prefixed = true;
  }
  if (prefixed) v.remove_prefix(2);
  if (base == 0) {
    base = 10;
    if (v.size() > 1 && v[0] == '0' && v.find_first_not_of("0_") != std::string_view::npos) {
      return std::nullopt;  // "012" is not valid with base 0
    }
  }
  if (base < 2 || base > 36 || v.empty()) return std::nullopt;
  int64_t value = 0;
  bool previous_digit = prefixed;  // "0x_1" is valid
  for (char c : v) {
    if (c == '_') {
      if (!previous_digit) return std::nullopt;
      previous_digit = false;
      continue;
    }
    int digit = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'z' ? c - 'a' + 10
                : c >= 'A' && c <= 'Z' ? c - 'A' + 10
                                       : 99;
    if (digit >= base) return std::nullopt;
    if (__builtin_mul_overflow(value, base, &value) ||
        __builtin_add_overflow(value, digit, &value)) {
      return std::nullopt;
    }
    previous_digit = true;
  }
  if (!previous_digit) return std::nullopt;
  return negative ? -value : value;
}

// Python's float(text).
std::optional<double> ParseFloat(std::string_view text) {
  std::string s = py::Strip(text, std::nullopt, true, true);
  std::string lower = py::Lower(s);
  std::string_view body = lower;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    double d = body == "nan" ? NAN : INFINITY;
    return lower[0] == '-' ? -d : d;
  }
  // Digits with single underscores between them, an optional fraction and exponent.
  std::string clean;
  bool digits = false, previous_digit = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean += s[i++];
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c >= '0' && c <= '9') {
      clean += c;
      digits = previous_digit = true;
    } else if (c == '_') {
      if (!previous_digit || i + 1 >= s.size() || s[i + 1] < '0' || s[i + 1] > '9') {
        return std::nullopt;
      }
      previous_digit = false;
    } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
      clean += c;
      previous_digit = false;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

Result<Value> Abs(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("abs", a, {}).status());
  if (v.is_integral()) {
    if (v.int_value() == INT64_MIN) return InvalidArgument("integer overflow");
    return Value::Int(std::abs(v.int_value()));
  }
  if (v.is_float()) return Value::Float(std::fabs(v.float_value()));
  if (v.is_undefined()) return UndefinedError(v);
  return TypeError("bad operand type for abs(): '" + std::string(v.TypeName()) + "'");
}

Result<Value> Attr(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("attr", a, {"name"}));
  if (!b[0] || !b[0]->is_string()) return TypeError("attr() needs an attribute name");
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_dict()) {  // a dict's keys are not attributes
    if (std::optional<Value> method = FindMethod(v, b[0]->string())) return *method;
    return Value::Undefined("'dict object' has no attribute " + py::Repr(b[0]->string()));
  }
  return GetAttr(v, b[0]->string());
}

template <std::string (*kTransform)(std::string_view)>
Result<Value> StringTransform(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("filter", a, {}).status());
  return Value::String(kTransform(Str(v)));
}

// Jinja2's title filter: words start after "-", whitespace or an opening bracket.
std::string JinjaTitle(std::string_view s) {
  std::u32string text = py::Decode(s);
  auto is_break = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py::IsSpace(c);
  };
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    const bool breaks = is_break(text[i]);
    while (j < text.size() && is_break(text[j]) == breaks) ++j;
    std::u32string_view item = std::u32string_view(text).substr(i, j - i);
    out += py::Upper(py::Encode(item.substr(0, 1)));
    out += py::Lower(py::Encode(item.substr(1)));
    i = j;
  }
  return out;
}

Result<Value> Center(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("center", a, {"width"}));
  PDSERVE_ASSIGN_OR_RETURN(int64_t width, IntArgument(b[0], 80, "width"));
  return Value::String(py::Pad(Str(v), width, ' ', 0));
}

Result<Value> Default(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("default", a, {"default_value", "boolean"}));
  bool boolean = b[1] && Truthy(*b[1]);
  if (v.is_undefined() || (boolean && !Truthy(v))) return Arg(b[0], Value::String(""));
  return v;
}

// markupsafe.escape.
Result<Value> Escape(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("escape", a, {}).status());
  return Value::String(HtmlEscape(Str(v)));
}

Result<Value> FloatFilter(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("float", a, {"default"}));
  Value fallback = Arg(b[0], Value::Float(0.0));
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_number()) return Value::Float(v.float_value());
  if (v.is_string()) {
    if (auto d = ParseFloat(v.string())) return Value::Float(*d);
  }
  return fallback;
}

Result<Value> IntFilter(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("int", a, {"default", "base"}));
  Value fallback = Arg(b[0], Value::Int(0));
  PDSERVE_ASSIGN_OR_RETURN(int64_t base, IntArgument(b[1], 10, "base"));
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_integral()) return Value::Int(v.int_value());
  double d = NAN;
  if (v.is_float()) {
    d = v.float_value();
  } else if (v.is_string()) {
    if (auto i = ParseInt(v.string(), base)) return Value::Int(*i);
    if (auto f = ParseFloat(v.string())) d = *f;
  }
  if (std::isnan(d)) return fallback;
  if (std::isinf(d)) return InvalidArgument("cannot convert float infinity to integer");
  if (std::fabs(d) >= 9.2e18) return InvalidArgument("integer overflow");
  return Value::Int(static_cast<int64_t>(std::trunc(d)));
}

Result<Value> Indent(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("indent", a, {"width", "first", "blank"}));
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_string()) {
    return TypeError("unsupported operand type(s) for +=: '" + std::string(v.TypeName()) +
                     "' and 'str'");
  }
  std::string indention;
  if (b[0] && b[0]->is_string()) {
    indention = b[0]->string();
  } else {
    PDSERVE_ASSIGN_OR_RETURN(int64_t width, IntArgument(b[0], 4, "width"));
    indention.assign(std::max<int64_t>(0, width), ' ');
  }
  std::vector<std::string> lines = py::SplitLines(v.string() + "\n", false);
  std::string out;
  if (b[2] && Truthy(*b[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (b[1] && Truthy(*b[1])) out = indention + out;
  return Value::String(std::move(out));
}

Result<Value> ReplaceFilter(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("replace", a, {"old", "new", "count"}));
  if (!b[0] || !b[1]) return TypeError("replace() needs the old and the new text");
  int64_t count = -1;
  if (Given(b[2])) {
    PDSERVE_ASSIGN_OR_RETURN(count, IntArgument(b[2], -1, "count"));
  }
  return Value::String(py::Replace(Str(v), Str(*b[0]), Str(*b[1]), count));
}

Result<Value> Round(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("round", a, {"precision", "method"}));
  PDSERVE_ASSIGN_OR_RETURN(int64_t precision, IntArgument(b[0], 0, "precision"));
  std::string method = b[1] && b[1]->is_string() ? b[1]->string() : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return InvalidArgument("method must be common, ceil or floor");
  }
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_number()) {
    return TypeError("type " + std::string(v.TypeName()) + " doesn't define __round__ method");
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method != "common") {
    double x = v.float_value() * scale;
    return Value::Float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
  }
  if (v.is_integral()) {
    if (precision >= 0) return Value::Int(v.int_value());
    double rounded = std::nearbyint(static_cast<double>(v.int_value()) / (1 / scale)) * (1 / scale);
    return Value::Int(static_cast<int64_t>(rounded));
  }
  double x = v.float_value();
  if (!std::isfinite(x)) return Value::Float(x);
  if (precision >= 0 && precision < 300) {
    // printf rounds the exact binary value half to even, as Python's round() does.
    char buffer[400];
    std::snprintf(buffer, sizeof buffer, "%.*f", static_cast<int>(precision), x);
    return Value::Float(std::strtod(buffer, nullptr));
  }
  return Value::Float(std::nearbyint(x * scale) / scale);
}

Result<Value> Safe(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("safe", a, {}).status());
  return Value::String(Str(v));
}

Result<Value> StringFilter(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("string", a, {}).status());
  return v.is_string() ? v : Value::String(Str(v));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False).
Result<Value> ToJsonFilter(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(
      Bound b, BindArguments("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonOptions options;
  options.ensure_ascii = b[0] && Truthy(*b[0]);
  if (Given(b[1])) {
    if (b[1]->is_string()) {
      options.indent = b[1]->string();
    } else if (b[1]->is_integral()) {
      options.indent = std::string(std::max<int64_t>(0, b[1]->int_value()), ' ');
    } else {
      return TypeError("tojson: indent must be an integer or a string");
    }
  }
  if (Given(b[2])) {
    const Value& s = *b[2];
    if (!s.is_list_or_tuple() || s.sequence().items.size() != 2 ||
        !s.sequence().items[0].is_string() || !s.sequence().items[1].is_string()) {
      return TypeError("tojson: separators must be a pair of strings");
    }
    options.separators.emplace(s.sequence().items[0].string(), s.sequence().items[1].string());
  }
  options.sort_keys = b[3] && Truthy(*b[3]);
  PDSERVE_ASSIGN_OR_RETURN(std::string text, ToJson(v, options));
  return Value::String(std::move(text));
}

Result<Value> Trim(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("trim", a, {"chars"}));
  std::optional<std::string> chars;
  if (Given(b[0])) chars = Str(*b[0]);
  return Value::String(py::Strip(Str(v), chars, true, true));
}

Result<Value> WordCount(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("wordcount", a, {}).status());
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : py::Decode(Str(v))) {
    bool word = c == '_' || u_isalpha(static_cast<UChar32>(c)) ||
                u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE) != U_NT_NONE;
    if (word && !in_word) ++words;
    in_word = word;
  }
  return Value::Int(words);
}

constexpr std::pair<std::string_view, FilterFunction> kFilters[] = {
    {"abs", Abs},
    {"attr", Attr},
    {"capitalize", StringTransform<py::Capitalize>},
    {"center", Center},
    {"count", sequence_filters::LengthFilter},
    {"d", Default},
    {"default", Default},
    {"dictsort", sequence_filters::DictSort},
    {"e", Escape},
    {"escape", Escape},
    {"first", sequence_filters::First},
    {"float", FloatFilter},
    {"forceescape", Escape},
    {"indent", Indent},
    {"int", IntFilter},
    {"items", sequence_filters::Items},
    {"join", sequence_filters::Join},
    {"last", sequence_filters::Last},
    {"length", sequence_filters::LengthFilter},
    {"list", sequence_filters::ListFilter},
    {"lower", StringTransform<py::Lower>},
    {"map", sequence_filters::Map},
    {"max", sequence_filters::Max},
    {"min", sequence_filters::Min},
    {"reject", sequence_filters::Reject},
    {"rejectattr", sequence_filters::RejectAttr},
    {"replace", ReplaceFilter},
    {"reverse", sequence_filters::Reverse},
    {"round", Round},
    {"safe", Safe},
    {"select", sequence_filters::Select},
    {"selectattr", sequence_filters::SelectAttr},
    {"sort", sequence_filters::Sort},
    {"string", StringFilter},
    {"sum", sequence_filters::Sum},
    {"title", StringTransform<JinjaTitle>},
    {"tojson", ToJsonFilter},
    {"trim", Trim},
    {"unique", sequence_filters::Unique},
    {"upper", StringTransform<py::Upper>},
    {"wordcount", WordCount},
};

constexpr std::string_view kUnsupported[] = {
    "batch",     "filesizeformat", "format",    "groupby", "pprint",   "random",  "slice",
    "striptags", "truncate",       "urlencode", "urlize",  "wordwrap", "xmlattr",
};

}  // namespace

FilterFunction FindFilter(std::string_view name) {
  for (const auto& [filter_name, function] : kFilters) {
    if (filter_name == name) return function;
  }
  return nullptr;
}

bool IsUnsupportedJinjaFilter(std::string_view name) {
  return std::find(std::begin(kUnsupported), std::end(kUnsupported), name) !=
         std::end(kUnsupported);
}

Result<Value> ApplyFilter(std::string_view name, const Value& input, const Arguments& args) {
  FilterFunction filter = FindFilter(name);
  if (filter == nullptr) return InvalidArgument("No filter named " + py::Repr(name) + ".");
  return filter(input, args);
}

}  // namespace pdserve::jinja
