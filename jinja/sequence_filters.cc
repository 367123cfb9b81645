#include "jinja/sequence_filters.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "jinja/filters.h"
#include "jinja/operations.h"
#include "jinja/predicates.h"
#include "jinja/python_str.h"
#include "jinja/value_text.h"

namespace pdserve::jinja::sequence_filters {
namespace {

using Bound = std::vector<std::optional<Value>>;

Value Arg(const std::optional<Value>& v, Value fallback) { return v ? *v : std::move(fallback); }

Status TypeError(std::string message) { return InvalidArgument(std::move(message)); }

// Jinja2's ignore_case: strings compare lowercased.
Value IgnoreCase(const Value& v) {
  return v.is_string() ? Value::String(py::Lower(v.string())) : v;
}

// Jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0, each with getitem.
class AttributeGetter {
 public:
  AttributeGetter() = default;
  explicit AttributeGetter(const Value& attribute) {
    if (attribute.is_none() || attribute.is_undefined()) return;
    if (!attribute.is_string()) {
      parts_.push_back(attribute);
      return;
    }
    std::string_view path = attribute.string();
    while (true) {
      size_t dot = path.find('.');
      std::string_view part = path.substr(0, dot);
      bool digits = !part.empty() && std::all_of(part.begin(), part.end(),
                                                 [](char c) { return c >= '0' && c <= '9'; });
      parts_.push_back(digits ? Value::Int(std::stoll(std::string(part)))
                              : Value::String(std::string(part)));
      if (dot == std::string_view::npos) break;
      path.remove_prefix(dot + 1);
    }
  }

  // `fallback` replaces an Undefined met on the way (map's default=).
  Result<Value> operator()(Value item, const std::optional<Value>& fallback = std::nullopt) const {
    for (const Value& part : parts_) {
      PDSERVE_ASSIGN_OR_RETURN(item, GetItem(item, part));
      if (fallback && item.is_undefined()) item = *fallback;
    }
    return item;
  }

 private:
  std::vector<Value> parts_;
};

// Sorts `items` by `keys` (Python's sorted: stable, reverse keeps equal items in order).
Status SortByKeys(std::vector<Value>& items, std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  Status error;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (!error.ok()) return false;
    auto less = reverse ? Compare("<", keys[b], keys[a]) : Compare("<", keys[a], keys[b]);
    if (!less.ok()) {
      error = less.status();
      return false;
    }
    return *less;
  });
  PDSERVE_RETURN_IF_ERROR(error);
  std::vector<Value> sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
  return Status::Ok();
}

Result<Value> MinMax(const Value& v, const Arguments& a, bool max) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b,
                           BindArguments(max ? "max" : "min", a, {"case_sensitive", "attribute"}));
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  bool case_sensitive = b[0] && Truthy(*b[0]);
  AttributeGetter getter(Arg(b[1], Value::None()));
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    PDSERVE_ASSIGN_OR_RETURN(Value key, getter(items[i]));
    if (!case_sensitive) key = IgnoreCase(key);
    if (i == 0) {
      best_key = key;
      continue;
    }
    PDSERVE_ASSIGN_OR_RETURN(bool better,
                             max ? Compare(">", key, best_key) : Compare("<", key, best_key));
    if (better) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

// select / reject / selectattr / rejectattr.
Result<Value> SelectOrReject(const Value& v, const Arguments& a, bool keep_if, bool by_attribute) {
  if (!Truthy(v)) return Value::Iterator({});
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  AttributeGetter getter;
  size_t offset = 0;
  if (by_attribute) {
    if (a.positional.empty()) return InvalidArgument("Missing parameter for attribute name");
    getter = AttributeGetter(a.positional[0]);
    offset = 1;
  }
  std::optional<std::string> test;
  if (a.positional.size() > offset) {
    if (!a.positional[offset].is_string()) return InvalidArgument("a test name must be a string");
    test = a.positional[offset].string();
  }
  Arguments rest;
  if (a.positional.size() > offset + 1) {
    rest.positional.assign(a.positional.begin() + offset + 1, a.positional.end());
  }
  rest.keyword = a.keyword;
  std::vector<Value> kept;
  for (const Value& item : items) {
    PDSERVE_ASSIGN_OR_RETURN(Value subject, getter(item));
    bool pass;
    if (test) {
      PDSERVE_ASSIGN_OR_RETURN(pass, ApplyTest(*test, subject, rest));
    } else {
      pass = Truthy(subject);
    }
    if (pass == keep_if) kept.push_back(item);
  }
  return Value::Iterator(std::move(kept));
}

}  // namespace

Result<Value> LengthFilter(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("length", a, {}).status());
  PDSERVE_ASSIGN_OR_RETURN(int64_t n, Length(v));
  return Value::Int(n);
}

Result<Value> DictSort(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b,
                           BindArguments("dictsort", a, {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return TypeError("dictsort expects a mapping");
  bool case_sensitive = b[0] && Truthy(*b[0]);
  std::string by = b[1] && b[1]->is_string() ? b[1]->string() : "key";
  if (by != "key" && by != "value") {
    return InvalidArgument("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<Value> items, keys;
  for (const auto& [key, value] : v.dict().entries()) {
    items.push_back(Value::Tuple({Value::String(key), value}));
    Value k = by == "key" ? Value::String(key) : value;
    keys.push_back(case_sensitive ? k : IgnoreCase(k));
  }
  PDSERVE_RETURN_IF_ERROR(SortByKeys(items, keys, b[2] && Truthy(*b[2])));
  return Value::List(std::move(items));
}

Result<Value> First(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("first", a, {}).status());
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> Last(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("last", a, {}).status());
  if (v.is_sequence() && v.sequence().kind == SequenceKind::kIterator) {
    return TypeError("'generator' object is not reversible");
  }
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> Items(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("items", a, {}).status());
  if (v.is_undefined()) return Value::Iterator({});
  if (!v.is_dict()) return TypeError("Can only get item pairs from a mapping.");
  std::vector<Value> items;
  for (const auto& [key, value] : v.dict().entries()) {
    items.push_back(Value::Tuple({Value::String(key), value}));
  }
  return Value::Iterator(std::move(items));
}

Result<Value> Join(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("join", a, {"d", "attribute"}));
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  AttributeGetter getter(Arg(b[1], Value::None()));
  const std::string separator = Str(Arg(b[0], Value::String("")));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    PDSERVE_ASSIGN_OR_RETURN(Value item, getter(items[i]));
    if (i > 0) out += separator;
    out += Str(item);
  }
  return Value::String(std::move(out));
}

Result<Value> ListFilter(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("list", a, {}).status());
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  return Value::List(std::move(items));
}

Result<Value> Map(const Value& v, const Arguments& a) {
  if (!Truthy(v)) return Value::Iterator({});
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<Value> mapped;
  mapped.reserve(items.size());
  const Value* attribute = nullptr;
  std::optional<Value> fallback;
  for (const auto& [key, value] : a.keyword) {
    if (key == "attribute") attribute = &value;
  }
  if (a.positional.empty() && attribute != nullptr) {
    for (const auto& [key, value] : a.keyword) {
      if (key == "default") {
        if (!value.is_none()) fallback = value;
      } else if (key != "attribute") {
        return InvalidArgument("Unexpected keyword argument " + py::Repr(key));
      }
    }
    AttributeGetter getter(*attribute);
    for (const Value& item : items) {
      PDSERVE_ASSIGN_OR_RETURN(Value out, getter(item, fallback));
      mapped.push_back(std::move(out));
    }
    return Value::Iterator(std::move(mapped));
  }
  if (a.positional.empty() || !a.positional[0].is_string()) {
    return InvalidArgument("map requires a filter argument");
  }
  Arguments rest{std::vector<Value>(a.positional.begin() + 1, a.positional.end()), a.keyword};
  for (const Value& item : items) {
    PDSERVE_ASSIGN_OR_RETURN(Value out, ApplyFilter(a.positional[0].string(), item, rest));
    mapped.push_back(std::move(out));
  }
  return Value::Iterator(std::move(mapped));
}

Result<Value> Min(const Value& v, const Arguments& a) { return MinMax(v, a, false); }
Result<Value> Max(const Value& v, const Arguments& a) { return MinMax(v, a, true); }

Result<Value> Select(const Value& v, const Arguments& a) {
  return SelectOrReject(v, a, true, false);
}
Result<Value> Reject(const Value& v, const Arguments& a) {
  return SelectOrReject(v, a, false, false);
}
Result<Value> SelectAttr(const Value& v, const Arguments& a) {
  return SelectOrReject(v, a, true, true);
}
Result<Value> RejectAttr(const Value& v, const Arguments& a) {
  return SelectOrReject(v, a, false, true);
}

Result<Value> Reverse(const Value& v, const Arguments& a) {
  PDSERVE_RETURN_IF_ERROR(BindArguments("reverse", a, {}).status());
  if (v.is_string()) {
    std::u32string text = py::Decode(v.string());
    std::reverse(text.begin(), text.end());
    return Value::String(py::Encode(text));
  }
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::reverse(items.begin(), items.end());
  // reversed() works on sequences and dicts; a generator is listed and reversed instead.
  if (v.is_sequence() && v.sequence().kind == SequenceKind::kIterator) {
    return Value::List(std::move(items));
  }
  return Value::Iterator(std::move(items));
}

Result<Value> Sort(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b,
                           BindArguments("sort", a, {"reverse", "case_sensitive", "attribute"}));
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  bool case_sensitive = b[1] && Truthy(*b[1]);
  std::vector<AttributeGetter> getters;
  Value attribute = Arg(b[2], Value::None());
  if (attribute.is_string()) {
    PDSERVE_ASSIGN_OR_RETURN(auto parts, py::Split(attribute.string(), ",", -1, false));
    for (const std::string& part : parts) getters.emplace_back(Value::String(part));
  } else {
    getters.emplace_back(attribute);
  }
  std::vector<Value> keys;
  for (const Value& item : items) {
    std::vector<Value> key;
    for (const AttributeGetter& getter : getters) {
      PDSERVE_ASSIGN_OR_RETURN(Value part, getter(item));
      key.push_back(case_sensitive ? part : IgnoreCase(part));
    }
    keys.push_back(Value::List(std::move(key)));
  }
  PDSERVE_RETURN_IF_ERROR(SortByKeys(items, keys, b[0] && Truthy(*b[0])));
  return Value::List(std::move(items));
}

Result<Value> Sum(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("sum", a, {"attribute", "start"}));
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  AttributeGetter getter(Arg(b[0], Value::None()));
  Value total = Arg(b[1], Value::Int(0));
  for (const Value& item : items) {
    PDSERVE_ASSIGN_OR_RETURN(Value term, getter(item));
    PDSERVE_ASSIGN_OR_RETURN(total, BinaryOp("+", total, term));
  }
  return total;
}

Result<Value> Unique(const Value& v, const Arguments& a) {
  PDSERVE_ASSIGN_OR_RETURN(Bound b, BindArguments("unique", a, {"case_sensitive", "attribute"}));
  PDSERVE_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  bool case_sensitive = b[0] && Truthy(*b[0]);
  AttributeGetter getter(Arg(b[1], Value::None()));
  std::vector<Value> seen, kept;
  for (const Value& item : items) {
    PDSERVE_ASSIGN_OR_RETURN(Value key, getter(item));
    if (!case_sensitive) key = IgnoreCase(key);
    if (key.is_sequence() && key.sequence().kind == SequenceKind::kList) {
      return TypeError("unhashable type: 'list'");
    }
    if (key.is_dict()) return TypeError("unhashable type: 'dict'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return Equals(s, key); })) {
      seen.push_back(key);
      kept.push_back(item);
    }
  }
  return Value::Iterator(std::move(kept));
}

}  // namespace pdserve::jinja::sequence_filters
