#include "jinja/value.h"

#include <limits>
#include <nlohmann/json.hpp>

namespace pdserve::jinja {
namespace {

template <typename Json>
Value ConvertJson(const Json& json) {
  switch (json.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value::Bool(json.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(json.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      auto u = json.template get<uint64_t>();
      if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Value::Int(static_cast<int64_t>(u));
      }
      return Value::Float(static_cast<double>(u));  // past int64: Python would keep it exact
    }
    case nlohmann::json::value_t::number_float:
      return Value::Float(json.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::String(json.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(ConvertJson(item));
      return Value::List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict dict;
      for (auto it = json.begin(); it != json.end(); ++it) dict.Set(it.key(), ConvertJson(*it));
      return Value::MakeDict(std::move(dict));
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  return Value::None();
}

}  // namespace

Result<std::vector<std::optional<Value>>> BindArguments(std::string_view function,
                                                        const Arguments& args,
                                                        std::span<const std::string_view> params) {
  std::vector<std::optional<Value>> bound(params.size());
  if (args.positional.size() > params.size()) {
    return InvalidArgument(std::string(function) + "() takes at most " +
                           std::to_string(params.size()) + " argument(s) (" +
                           std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view param : params) {
      if (param == name) break;
      ++i;
    }
    if (i == params.size()) {
      return InvalidArgument(std::string(function) + "() got an unexpected keyword argument '" +
                             name + "'");
    }
    if (bound[i]) {
      return InvalidArgument(std::string(function) + "() got multiple values for argument '" +
                             name + "'");
    }
    bound[i] = value;
  }
  return bound;
}

size_t Dict::IndexOf(std::string_view key) const {
  if (entries_.size() <= kLinearSearch) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].first == key) return i;
    }
    return entries_.size();
  }
  auto it = index_.find(std::string(key));
  return it == index_.end() ? entries_.size() : it->second;
}

const Value* Dict::Find(std::string_view key) const {
  size_t i = IndexOf(key);
  return i == entries_.size() ? nullptr : &entries_[i].second;
}

void Dict::Set(std::string key, Value value) {
  if (size_t i = IndexOf(key); i != entries_.size()) {
    entries_[i].second = std::move(value);
    return;
  }
  entries_.emplace_back(std::move(key), std::move(value));
  if (entries_.size() == kLinearSearch + 1) {
    for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
  } else if (entries_.size() > kLinearSearch + 1) {
    index_.emplace(entries_.back().first, entries_.size() - 1);
  }
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.ref_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.scalar_.b = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.scalar_.i = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.scalar_.f = f;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.ref_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::List(std::vector<Value> items) {
  return MakeSequence(
      std::make_shared<const Sequence>(Sequence{SequenceKind::kList, std::move(items)}));
}

Value Value::Tuple(std::vector<Value> items) {
  return MakeSequence(
      std::make_shared<const Sequence>(Sequence{SequenceKind::kTuple, std::move(items)}));
}

Value Value::Iterator(std::vector<Value> items) {
  return MakeSequence(
      std::make_shared<const Sequence>(Sequence{SequenceKind::kIterator, std::move(items)}));
}

Value Value::MakeSequence(std::shared_ptr<const Sequence> sequence) {
  Value v;
  v.kind_ = Kind::kSequence;
  v.ref_ = std::move(sequence);
  return v;
}

Value Value::MakeDict(std::shared_ptr<const Dict> dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.ref_ = std::move(dict);
  return v;
}

Value Value::MakeDict(Dict dict) { return MakeDict(std::make_shared<const Dict>(std::move(dict))); }

Value Value::Namespace(std::shared_ptr<Dict> attributes) {
  Value v;
  v.kind_ = Kind::kNamespace;
  v.ref_ = std::move(attributes);
  return v;
}

Value Value::Function(std::string name, NativeFunction function, CallableKind kind) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.ref_ = std::make_shared<const Callable>(Callable{std::move(name), kind, std::move(function)});
  return v;
}

Value Value::Loop(std::shared_ptr<LoopState> loop) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.ref_ = std::move(loop);
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& json) { return ConvertJson(json); }
Value Value::FromJson(const nlohmann::json& json) { return ConvertJson(json); }

const std::string& Value::string() const {
  static const std::string kEmpty;
  if (auto* s = std::get_if<std::shared_ptr<const std::string>>(&ref_)) return **s;
  return kEmpty;
}

const Sequence& Value::sequence() const { return *sequence_ptr(); }

const std::shared_ptr<const Sequence>& Value::sequence_ptr() const {
  return std::get<std::shared_ptr<const Sequence>>(ref_);
}

const Dict& Value::dict() const { return *std::get<std::shared_ptr<const Dict>>(ref_); }

Dict& Value::namespace_attributes() const { return *std::get<std::shared_ptr<Dict>>(ref_); }

const Callable& Value::callable() const { return *std::get<std::shared_ptr<const Callable>>(ref_); }

LoopState& Value::loop() const { return *loop_ptr(); }

const std::shared_ptr<LoopState>& Value::loop_ptr() const {
  return std::get<std::shared_ptr<LoopState>>(ref_);
}

std::string_view Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kSequence:
      switch (sequence().kind) {
        case SequenceKind::kList:
          return "list";
        case SequenceKind::kTuple:
          return "tuple";
        case SequenceKind::kIterator:
          return "generator";
      }
      break;
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return callable().kind == CallableKind::kMacro ? "Macro" : "function";
    case Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

}  // namespace pdserve::jinja
