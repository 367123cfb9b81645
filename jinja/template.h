// A Jinja template rendered byte for byte as Python's Jinja2 renders it in the environment
// Hugging Face transformers builds for chat templates (ImmutableSandboxedEnvironment with
// trim_blocks, lstrip_blocks and loopcontrols; transformers' tojson). This is the engine's one
// entry point: tokenizer/chat_template.h renders models' chat templates with it.
//
// Parse once, render many times: after Parse (and any AddFunction calls, which belong to setting
// up), a Template is immutable and Render is safe to call from any number of threads at once.
// Copies share the parsed tree.
//
// Not supported, and refused by Parse naming the line: {% include %}, {% extends %},
// {% import %}, {% block %}, {% call %}, recursive loops, *args/**kwargs in calls, and the
// filters groupby, format, truncate, wordwrap, urlize, ... (jinja/filters.h). Integers are
// 64-bit (an overflow is a render error where Python's would grow).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "jinja/ast.h"
#include "jinja/value.h"

namespace pdserve::jinja {

class Template {
 public:
  // `origin` names the template in errors ("tokenizer_config.json", a file path). A syntax
  // error, an unknown tag, filter or test, or text that is not UTF-8 is InvalidArgument
  // "ORIGIN:LINE: message".
  static Result<Template> Parse(std::string_view source, std::string_view origin);

  // Makes `function` callable from the template as `name` (a variable of that name passed to
  // Render hides it, as in Jinja2). Its errors reach Render's caller unchanged (raise_exception's
  // message is the whole error).
  void AddFunction(const std::string& name, NativeFunction function);

  // Renders with the members of the JSON object `variables` as the template's variables (an
  // ordered_json keeps its key order where the template iterates or prints a dict). Render
  // errors are InvalidArgument "ORIGIN:LINE: message", except those of AddFunction's functions.
  Result<std::string> Render(const nlohmann::ordered_json& variables) const;
  Result<std::string> Render(const nlohmann::json& variables) const;

  const std::string& origin() const { return origin_; }

 private:
  Template() = default;
  Result<std::string> RenderValue(const Value& variables) const;

  std::shared_ptr<const StmtList> body_;
  std::string origin_;
  Dict globals_;
};

}  // namespace pdserve::jinja
