// The values a Jinja template computes with, modelled on the Python objects Jinja2 hands
// around: Undefined, None, bool, int, float, str (UTF-8), list/tuple and one-shot iterators
// (what `select` or `map` return), dicts keeping insertion order, namespace() objects, callables
// (builtins, bound methods, macros) and a for loop's `loop`. Lists, tuples and dicts are
// immutable once built (Hugging Face renders in Jinja2's ImmutableSandboxedEnvironment); only a
// namespace and a loop's state change. Used by everything in jinja/; callers of the engine pass
// JSON (jinja/template.h) and register functions (NativeFunction). Values are cheap to copy
// (shared, reference-counted payloads) and belong to one render on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace pdserve::jinja {

class Value;
struct Arguments;
struct Callable;
struct Sequence;
class Dict;
struct LoopState;
using NativeFunction = std::function<Result<Value>(const Arguments&)>;

enum class CallableKind {
  kBuiltin,  // range, namespace, a bound method: errors get the calling template line
  kMacro,    // a template macro: errors already carry their own line
  kForeign,  // registered by the caller (raise_exception): errors pass through unchanged
};

enum class SequenceKind {
  kList,
  kTuple,
  kIterator,  // a generator or reverse iterator: no len(), no [i], always true
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kSequence,
    kDict,
    kNamespace,
    kCallable,
    kLoop,
  };

  // Undefined; `hint` is what an error says when the value is used ("'x' is undefined").
  Value() = default;
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  static Value List(std::vector<Value> items);
  static Value Tuple(std::vector<Value> items);
  static Value Iterator(std::vector<Value> items);
  static Value MakeSequence(std::shared_ptr<const Sequence> sequence);
  static Value MakeDict(std::shared_ptr<const Dict> dict);
  static Value MakeDict(Dict dict);
  static Value Namespace(std::shared_ptr<Dict> attributes);
  static Value Function(std::string name, NativeFunction function,
                        CallableKind kind = CallableKind::kBuiltin);
  static Value Loop(std::shared_ptr<LoopState> loop);
  // JSON objects keep their key order (ordered_json), or sorted order (json).
  static Value FromJson(const nlohmann::ordered_json& json);
  static Value FromJson(const nlohmann::json& json);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  // Python's int includes bool.
  bool is_integral() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return is_integral() || is_float(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_list_or_tuple() const;
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_loop() const { return kind_ == Kind::kLoop; }

  bool bool_value() const { return scalar_.b; }
  // bool counts as 0/1, as in Python.
  int64_t int_value() const { return kind_ == Kind::kBool ? scalar_.b : scalar_.i; }
  double float_value() const {
    return kind_ == Kind::kFloat ? scalar_.f : static_cast<double>(int_value());
  }
  const std::string& string() const;  // kString, or an Undefined's hint
  const Sequence& sequence() const;
  const std::shared_ptr<const Sequence>& sequence_ptr() const;
  const Dict& dict() const;
  Dict& namespace_attributes() const;
  const Callable& callable() const;
  LoopState& loop() const;
  const std::shared_ptr<LoopState>& loop_ptr() const;

  // Python's type name, for error messages: "str", "int", "dict", "NoneType".
  std::string_view TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  union {
    bool b;
    int64_t i;
    double f;
  } scalar_{};
  std::variant<std::monostate, std::shared_ptr<const std::string>, std::shared_ptr<const Sequence>,
               std::shared_ptr<const Dict>, std::shared_ptr<Dict>, std::shared_ptr<const Callable>,
               std::shared_ptr<LoopState>>
      ref_;
};

// A call's arguments: `f(1, 2, key=3)`.
struct Arguments {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Binds `args` to `params` as Python binds a call to `def function(p0=None, p1=None, ...)`:
// result[i] is the value given for params[i], or nullopt. More positional arguments than
// parameters, an unknown keyword or one given twice are InvalidArgument naming `function`.
Result<std::vector<std::optional<Value>>> BindArguments(std::string_view function,
                                                        const Arguments& args,
                                                        std::span<const std::string_view> params);
inline Result<std::vector<std::optional<Value>>> BindArguments(
    std::string_view function, const Arguments& args,
    std::initializer_list<std::string_view> params) {
  return BindArguments(function, args,
                       std::span<const std::string_view>(params.begin(), params.size()));
}

// A builtin, a bound method or a macro. `Result` errors are render errors.
struct Callable {
  using Kind = CallableKind;
  std::string name;
  Kind kind = Kind::kBuiltin;
  NativeFunction function;
};

struct Sequence {
  SequenceKind kind = SequenceKind::kList;
  std::vector<Value> items;
};

// A Python dict with string keys, in insertion order.
class Dict {
 public:
  const Value* Find(std::string_view key) const;
  // Inserts at the end, or replaces in place when the key exists.
  void Set(std::string key, Value value);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }

 private:
  static constexpr size_t kLinearSearch = 8;   // small dicts are searched without the index
  size_t IndexOf(std::string_view key) const;  // size() when absent

  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;  // built past kLinearSearch entries
};

// A for loop's state, seen by the template as `loop`.
struct LoopState {
  std::shared_ptr<const Sequence> items;  // everything the loop iterates, filtered
  size_t index0 = 0;
  int depth0 = 0;
  std::vector<Value> last_changed;  // loop.changed(...)'s previous arguments
  bool changed_called = false;
};

inline bool Value::is_list_or_tuple() const {
  return is_sequence() && sequence().kind != SequenceKind::kIterator;
}

}  // namespace pdserve::jinja
