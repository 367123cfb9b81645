// Jinja2's filters (`value|name(args)`) with Jinja2 3.1's semantics, and transformers' `tojson`
// (json.dumps with ensure_ascii=False, indent, separators, sort_keys) in place of Jinja2's: the
// text and number filters here, the sequence filters in jinja/sequence_filters.h, all looked up
// through this registry. The
// parser asks IsSupportedFilter so that a template naming a filter this engine lacks fails at
// load time; `map('name')` looks filters up while rendering. Stateless: safe from any thread.
#pragma once

#include <string_view>

#include "common/status.h"
#include "jinja/value.h"

namespace pdserve::jinja {

using FilterFunction = Result<Value> (*)(const Value& input, const Arguments& args);

// The filter called `name` (aliases included: `d` for `default`, `e` for `escape`), or null.
FilterFunction FindFilter(std::string_view name);
// A filter Jinja2 has that this engine does not implement (`groupby`, `urlize` ...).
bool IsUnsupportedJinjaFilter(std::string_view name);

// `filter(input, *args, **kwargs)` by name; an unknown name is an error ("No filter named 'x'.").
Result<Value> ApplyFilter(std::string_view name, const Value& input, const Arguments& args);

}  // namespace pdserve::jinja
