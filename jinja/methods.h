// The Python methods and attributes templates reach on builtin objects: str (`.strip()`,
// `.split()`, `.startswith()` ...), dict (`.items()`, `.get()` ...), list and tuple (`.index()`,
// `.count()`), and a for loop's `loop` (`loop.index`, `loop.last`, `loop.cycle()` ...). Methods
// that would change a list or dict are refused as Jinja2's ImmutableSandboxedEnvironment refuses
// them (an Undefined whose use is an error). Called by jinja/operations.cc's attribute lookup.
#pragma once

#include <optional>
#include <string_view>

#include "jinja/value.h"

namespace pdserve::jinja {

// `self.name` when `name` is a method (a bound callable) or, for a loop, an attribute of
// `self`'s type; nullopt when the type has no such attribute.
std::optional<Value> FindMethod(const Value& self, std::string_view name);

}  // namespace pdserve::jinja
