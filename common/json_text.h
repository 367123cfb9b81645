// JSON values from outside (a client's request body, a model's config.json or safetensors
// header) as they may be quoted back in an error message, and JSON text as it may go out when
// part of it came from outside. nlohmann's dump() recurses once per level of nesting (a body of
// 100,000 nested arrays overflows the stack) and throws on a string that is not UTF-8 (bytes
// from an HTTP header or path): neither may take a process down. Pure functions; any thread.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace pdserve {

// A short description of `v` for an error message: a number, boolean or null as written, a
// string quoted (cut to 64 bytes, bytes that are not UTF-8 replaced), an array or object by its
// kind ("an array of 3", "an object"). Never recurses.
std::string DescribeJson(const nlohmann::json& v);

// v.dump(indent), with any invalid UTF-8 in its strings replaced by U+FFFD instead of throwing.
// For values built here that may hold outside bytes (error messages quoting a header, text
// read back from a ledger or a server), nesting as deep as this program made them.
std::string DumpJson(const nlohmann::json& v, int indent = -1);

// How deeply arrays and objects nest in JSON text (0 for a scalar), without parsing it; counts
// brackets outside strings, so it is right for valid JSON and harmless for invalid.
int JsonNestingDepth(std::string_view text);

}  // namespace pdserve
