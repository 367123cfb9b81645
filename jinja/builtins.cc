#include "jinja/builtins.h"

#include <ctime>
#include <string>

#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

// Jinja2's sandbox refuses ranges longer than this (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Result<Value> Range(const Arguments& args) {
  if (!args.keyword.empty()) return InvalidArgument("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) {
    return InvalidArgument("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  }
  for (const Value& v : p) {
    if (!v.is_integral()) {
      return InvalidArgument(std::string("'").append(v.TypeName()) +
                             "' object cannot be interpreted as an integer");
    }
  }
  int64_t start = p.size() == 1 ? 0 : p[0].int_value();
  int64_t stop = p.size() == 1 ? p[0].int_value() : p[1].int_value();
  int64_t step = p.size() == 3 ? p[2].int_value() : 1;
  if (step == 0) return InvalidArgument("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      return InvalidArgument(
          "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    items.push_back(Value::Int(i));
  }
  return Value::List(std::move(items));
}

// dict(*args, **kwargs) for namespace() and dict(): a mapping argument, then keywords.
Result<Dict> MergeArguments(const Arguments& args, std::string_view function) {
  Dict dict;
  if (args.positional.size() > 1) {
    return InvalidArgument(std::string(function) + " expected at most 1 argument, got " +
                           std::to_string(args.positional.size()));
  }
  if (!args.positional.empty()) {
    const Value& mapping = args.positional[0];
    if (!mapping.is_dict()) {
      return InvalidArgument(std::string(function) + "(): a mapping argument is supported, not " +
                             std::string(mapping.TypeName()));
    }
    dict = mapping.dict();
  }
  for (const auto& [key, value] : args.keyword) dict.Set(key, value);
  return dict;
}

}  // namespace

Dict DefaultGlobals() {
  Dict globals;
  globals.Set("range", Value::Function("range", Range));
  globals.Set("namespace", Value::Function("namespace", [](const Arguments& args) -> Result<Value> {
                PDSERVE_ASSIGN_OR_RETURN(Dict attributes, MergeArguments(args, "namespace"));
                return Value::Namespace(std::make_shared<Dict>(std::move(attributes)));
              }));
  globals.Set("dict", Value::Function("dict", [](const Arguments& args) -> Result<Value> {
                PDSERVE_ASSIGN_OR_RETURN(Dict dict, MergeArguments(args, "dict"));
                return Value::MakeDict(std::move(dict));
              }));
  return globals;
}

NativeFunction RaiseExceptionFunction() {
  return [](const Arguments& args) -> Result<Value> {
    if (args.positional.size() != 1 || !args.keyword.empty()) {
      return InvalidArgument("raise_exception() takes exactly one argument");
    }
    return InvalidArgument(Str(args.positional[0]));
  };
}

NativeFunction StrftimeNowFunction() {
  return [](const Arguments& args) -> Result<Value> {
    if (args.positional.size() != 1 || !args.positional[0].is_string()) {
      return InvalidArgument("strftime_now() takes one format string");
    }
    const std::string& format = args.positional[0].string();
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    if (format.empty()) return Value::String("");
    for (size_t size = 256; size <= 65536; size *= 4) {
      std::string out(size, '\0');
      size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
      if (n > 0) {
        out.resize(n);
        return Value::String(std::move(out));
      }
    }
    return Value::String("");  // a format that writes nothing, like "%p" in some locales
  };
}

}  // namespace pdserve::jinja
