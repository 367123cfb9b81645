// How Jinja values print: Python's str() and repr() of the objects they model (what `{{ x }}`,
// `~` and `|string` write), and json.dumps as transformers' `tojson` filter calls it. Used by
// the renderer and the filters. Pure functions: safe from any thread.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"
#include "jinja/value.h"

namespace pdserve::jinja {

// str(value): strings as they are, None as "None", True as "True", floats as repr(),
// containers as their repr(); Undefined as "".
std::string Str(const Value& value);
// repr(value): strings quoted, Undefined as "Undefined".
std::string Repr(const Value& value);

// json.dumps's options (Python's defaults, but ensure_ascii false as transformers passes it).
struct JsonOptions {
  bool ensure_ascii = false;
  // The text each nesting level indents by (indent=4 is "    "); absent: everything on one line.
  std::optional<std::string> indent;
  // separators=(item, key); absent: (", ", ": ") without indent, (",", ": ") with it.
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};

// json.dumps(value): Undefined, namespaces, callables and iterators are InvalidArgument
// ("Object of type Undefined is not JSON serializable"), as they are TypeErrors in Python.
Result<std::string> ToJson(const Value& value, const JsonOptions& options);

}  // namespace pdserve::jinja
