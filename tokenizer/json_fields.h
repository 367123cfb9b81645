// Reading the component objects of tokenizer.json (normalizer, pre_tokenizer, decoder steps):
// their "type" for dispatch and error messages, and optional string fields. For the tokenizer/
// files that parse those components; pure functions, any thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace pdserve::tokenizer {

// The component's "type" string, or "<not an object>" / "<no type>" for error messages.
inline std::string ComponentType(const nlohmann::json& config) {
  if (!config.is_object()) return "<not an object>";
  auto it = config.find("type");
  return it != config.end() && it->is_string() ? it->get<std::string>() : "<no type>";
}

// The string field `name` of `config`, or null when it is missing or not a string.
inline const std::string* StringField(const nlohmann::json& config, const char* name) {
  auto it = config.find(name);
  return it != config.end() && it->is_string() ? &it->get_ref<const std::string&>() : nullptr;
}

}  // namespace pdserve::tokenizer
