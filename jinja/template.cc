#include "jinja/template.h"

#include <nlohmann/json.hpp>

#include "common/utf8.h"
#include "jinja/builtins.h"
#include "jinja/parser.h"
#include "jinja/renderer.h"

namespace pdserve::jinja {

Result<Template> Template::Parse(std::string_view source, std::string_view origin) {
  if (std::optional<size_t> bad = FindInvalidUtf8(source)) {
    return InvalidArgument(std::string(origin) + ": not valid UTF-8 (byte " + std::to_string(*bad) +
                           ")");
  }
  PDSERVE_ASSIGN_OR_RETURN(StmtList body, jinja::Parse(source, origin));
  Template t;
  t.body_ = std::make_shared<const StmtList>(std::move(body));
  t.origin_ = std::string(origin);
  t.globals_ = DefaultGlobals();
  return t;
}

void Template::AddFunction(const std::string& name, NativeFunction function) {
  globals_.Set(name, Value::Function(name, std::move(function), CallableKind::kForeign));
}

Result<std::string> Template::Render(const nlohmann::ordered_json& variables) const {
  if (!variables.is_object()) return InvalidArgument("template variables must be a JSON object");
  return RenderValue(Value::FromJson(variables));
}

Result<std::string> Template::Render(const nlohmann::json& variables) const {
  if (!variables.is_object()) return InvalidArgument("template variables must be a JSON object");
  return RenderValue(Value::FromJson(variables));
}

Result<std::string> Template::RenderValue(const Value& variables) const {
  Renderer renderer(origin_, variables.dict(), globals_);
  return renderer.Render(*body_);
}

}  // namespace pdserve::jinja
