// Jinja2's filters over sequences and mappings (length, first, last, join, list, map, min,
// max, select, reject, selectattr, rejectattr, reverse, sort, sum, unique, items, dictsort),
// with Jinja2 3.1's semantics: map, select and the like give one-shot iterators as Jinja2's
// generators, attribute paths ("a.b.0") look items up as getitem does. Registered by
// jinja/filters.cc, which is what the rest of the engine calls. Stateless: safe from any thread.
#pragma once

#include "common/status.h"
#include "jinja/value.h"

namespace pdserve::jinja::sequence_filters {

Result<Value> LengthFilter(const Value& input, const Arguments& args);
Result<Value> DictSort(const Value& input, const Arguments& args);
Result<Value> First(const Value& input, const Arguments& args);
Result<Value> Last(const Value& input, const Arguments& args);
Result<Value> Items(const Value& input, const Arguments& args);
Result<Value> Join(const Value& input, const Arguments& args);
Result<Value> ListFilter(const Value& input, const Arguments& args);
Result<Value> Map(const Value& input, const Arguments& args);
Result<Value> Min(const Value& input, const Arguments& args);
Result<Value> Max(const Value& input, const Arguments& args);
Result<Value> Select(const Value& input, const Arguments& args);
Result<Value> Reject(const Value& input, const Arguments& args);
Result<Value> SelectAttr(const Value& input, const Arguments& args);
Result<Value> RejectAttr(const Value& input, const Arguments& args);
Result<Value> Reverse(const Value& input, const Arguments& args);
Result<Value> Sort(const Value& input, const Arguments& args);
Result<Value> Sum(const Value& input, const Arguments& args);
Result<Value> Unique(const Value& input, const Arguments& args);

}  // namespace pdserve::jinja::sequence_filters
