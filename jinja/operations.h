// Python's operators on Jinja values as Jinja2 evaluates them in its sandbox: truthiness, ==,
// ordering, `in`, arithmetic, len(), iteration, and attribute and item lookup (`x.name` tries
// the Python attribute, a method of str, dict or list, then the item; `x[key]` the other way
// round; a miss is Undefined, and using an Undefined is an error naming what was missing).
// Called by the renderer, the filters, the tests and the methods of jinja/. Errors are
// InvalidArgument with Python's message where it matters ("division by zero"); the renderer
// adds the template line. Pure functions: safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "jinja/value.h"

namespace pdserve::jinja {

// The error for using an Undefined (its hint: "'x' is undefined").
Status UndefinedError(const Value& undefined);

bool Truthy(const Value& value);
bool Equals(const Value& a, const Value& b);
// `op` is one of "<", "<=", ">", ">=": Python's rich comparison (numbers, strings, lists and
// tuples lexicographically); other pairs are a TypeError.
Result<bool> Compare(std::string_view op, const Value& a, const Value& b);
// `item in container`.
Result<bool> Contains(const Value& container, const Value& item);

// `op` is one of "+", "-", "*", "/", "//", "%", "**". Integers are 64-bit: an overflow is an
// error where Python would grow the integer.
Result<Value> BinaryOp(std::string_view op, const Value& a, const Value& b);
// Unary "-" or "+".
Result<Value> UnaryOp(std::string_view op, const Value& operand);

// len(value); Undefined has length 0.
Result<int64_t> Length(const Value& value);
// iter(value): a string's characters, a dict's keys, nothing for Undefined.
Result<std::vector<Value>> Iterate(const Value& value);

// `object.name` (Jinja2's environment.getattr).
Result<Value> GetAttr(const Value& object, std::string_view name);
// `object[key]` (Jinja2's environment.getitem).
Result<Value> GetItem(const Value& object, const Value& key);
// `object[start:stop:step]`; each bound absent or None means "not given".
Result<Value> GetSlice(const Value& object, const Value& start, const Value& stop,
                       const Value& step);

// Python's sequence index normalisation: `index` (negative counts from the end) into
// [0, length), or nullopt when out of range.
std::optional<size_t> NormalizeIndex(int64_t index, size_t length);

}  // namespace pdserve::jinja
