// Test support for the filter tests (tests/jinja/filters_test.cc, sequence_filters_test.cc): a
// value from JSON text, a filter applied through the registry as its printed result (or its
// error), and a two-message conversation.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jinja/filters.h"
#include "jinja/value_text.h"

namespace pdserve::jinja::testing {

inline Value Json(const char* text) { return Value::FromJson(nlohmann::ordered_json::parse(text)); }

inline std::string Apply(std::string_view name, const Value& input, std::vector<Value> args = {},
                         std::vector<std::pair<std::string, Value>> keywords = {}) {
  auto out = ApplyFilter(name, input, Arguments{std::move(args), std::move(keywords)});
  return out.ok() ? Str(*out) : "ERROR: " + out.status().message();
}

inline constexpr char kMessages[] =
    R"([{"role": "system", "content": " s "}, {"role": "user", "content": "u"}])";

}  // namespace pdserve::jinja::testing
