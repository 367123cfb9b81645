// Jinja2's tests (`value is name(args)`: defined, none, string, mapping, equalto, divisibleby
// ...) with Jinja2 3.1's semantics. The parser asks FindTest so that an unknown test fails at
// load time; `select('name')` looks tests up while rendering. Stateless: safe from any thread.
#pragma once

#include <string_view>

#include "common/status.h"
#include "jinja/value.h"

namespace pdserve::jinja {

using TestFunction = Result<bool> (*)(const Value& input, const Arguments& args);

// The test called `name` (aliases included: `==`, `eq`, `equalto`), or null.
TestFunction FindTest(std::string_view name);

// `input is name(*args)`; an unknown name is an error ("No test named 'x'.").
Result<bool> ApplyTest(std::string_view name, const Value& input, const Arguments& args);

}  // namespace pdserve::jinja
