#include "gateway/tool_calls.h"

#include <nlohmann/json.hpp>
#include <utility>

namespace pdserve::gateway {

namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string_view Trim(std::string_view s) {
  const size_t start = s.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(start, end - start + 1);
}

// A call object {"name": string, ARGS_KEY: object} (or an arguments string holding one).
std::optional<ToolCall> CallOf(const json& v, const char* args_key) {
  if (!v.is_object() || !v.contains("name") || !v["name"].is_string()) return std::nullopt;
  const char* key = v.contains(args_key) ? args_key : "arguments";
  json args = v.contains(key) ? v[key] : json::object();
  if (args.is_string()) args = json::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) return std::nullopt;
  return ToolCall{v["name"].get<std::string>(), args.dump()};
}

ParsedOutput Hermes(std::string_view text) {
  ParsedOutput out;
  const size_t first = text.find(kHermesOpen);
  if (first == std::string_view::npos) return {std::string(text), {}};
  size_t at = first;
  while (at != std::string_view::npos) {
    const size_t body = at + kHermesOpen.size();
    const size_t close = text.find(kHermesClose, body);
    const json v = json::parse(
        text.substr(body, close == std::string_view::npos ? std::string_view::npos : close - body),
        nullptr, false);
    auto call = CallOf(v, "arguments");
    if (!call) return {std::string(text), {}};
    out.calls.push_back(std::move(*call));
    if (close == std::string_view::npos) break;
    at = text.find(kHermesOpen, close + kHermesClose.size());
    // Only whitespace may stand between and after calls.
    const std::string_view between = text.substr(
        close + kHermesClose.size(),
        at == std::string_view::npos ? std::string_view::npos : at - close - kHermesClose.size());
    if (!Trim(between).empty()) return {std::string(text), {}};
  }
  out.content = std::string(Trim(text.substr(0, first)));
  return out;
}

ParsedOutput Llama3Json(std::string_view text) {
  std::string_view body = Trim(text);
  if (body.substr(0, kPythonTag.size()) == kPythonTag) body = Trim(body.substr(kPythonTag.size()));
  if (body.empty() || body.front() != '{') return {std::string(text), {}};
  ParsedOutput out;
  // One call, or several separated by ';'.
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find(';', start);
    json v;
    while (true) {
      v = json::parse(
          body.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start),
          nullptr, false);
      if (!v.is_discarded() || end == std::string_view::npos) break;
      end = body.find(';', end + 1);  // a ';' inside a string
    }
    auto call = CallOf(v, "parameters");
    if (!call) return {std::string(text), {}};
    out.calls.push_back(std::move(*call));
    if (end == std::string_view::npos) break;
    start = end + 1;
    while (start < body.size() && body[start] == ' ') ++start;
  }
  return out;
}

ParsedOutput Mistral(std::string_view text) {
  const size_t marker = text.find(kMistralMarker);
  std::string_view body = text;
  std::string content;
  if (marker != std::string_view::npos) {
    content = std::string(Trim(text.substr(0, marker)));
    body = text.substr(marker + kMistralMarker.size());
  } else if (Trim(text).substr(0, 2) != "[{") {
    return {std::string(text), {}};
  }
  const json v = json::parse(Trim(body), nullptr, false);
  if (!v.is_array() || v.empty()) return {std::string(text), {}};
  ParsedOutput out{content, {}};
  for (const json& item : v) {
    auto call = CallOf(item, "arguments");
    if (!call) return {std::string(text), {}};
    out.calls.push_back(std::move(*call));
  }
  return out;
}

// The length of the longest suffix of `text` that begins `marker`.
size_t PartialMarker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ToolCallFormat DetectToolCallFormat(std::string_view chat_template) {
  if (chat_template.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  if (chat_template.find("[TOOL_CALLS]") != std::string_view::npos) {
    return ToolCallFormat::kMistral;
  }
  if (chat_template.find("<|python_tag|>") != std::string_view::npos ||
      (chat_template.find("tools") != std::string_view::npos &&
       chat_template.find("\"parameters\"") != std::string_view::npos)) {
    return ToolCallFormat::kLlama3Json;
  }
  return ToolCallFormat::kNone;
}

const char* ToolCallFormatName(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return "hermes";
    case ToolCallFormat::kLlama3Json:
      return "llama3_json";
    case ToolCallFormat::kMistral:
      return "mistral";
    case ToolCallFormat::kNone:
      break;
  }
  return "none";
}

ParsedOutput ParseToolCalls(ToolCallFormat format, std::string_view text) {
  switch (format) {
    case ToolCallFormat::kHermes:
      return Hermes(text);
    case ToolCallFormat::kLlama3Json:
      return Llama3Json(text);
    case ToolCallFormat::kMistral:
      return Mistral(text);
    case ToolCallFormat::kNone:
      break;
  }
  return {std::string(text), {}};
}

std::string ToolCallSplitter::Push(std::string_view text) {
  if (format_ == ToolCallFormat::kNone) return std::string(text);
  held_.append(text);
  if (calling_) return {};
  if (format_ == ToolCallFormat::kLlama3Json) {
    // A call opens the output: hold it all while it may be one.
    if (!seen_content_) {
      const std::string_view start = Trim(held_);
      if (start.empty() || (start.size() < kPythonTag.size() && kPythonTag.starts_with(start))) {
        return {};  // it may yet be the tag
      }
      if (start.front() == '{' || start.starts_with(kPythonTag)) {
        calling_ = true;
        return {};
      }
      seen_content_ = true;
    }
    return std::exchange(held_, {});
  }
  const std::string_view marker = format_ == ToolCallFormat::kHermes ? kHermesOpen : kMistralMarker;
  const size_t at = held_.find(marker);
  if (at != std::string::npos) {
    calling_ = true;
    std::string out = held_.substr(0, at);
    held_.erase(0, at);
    return out;
  }
  const size_t keep = PartialMarker(held_, marker);
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

ParsedOutput ToolCallSplitter::Finish() {
  ParsedOutput out = calling_ ? ParseToolCalls(format_, held_) : ParsedOutput{held_, {}};
  held_.clear();
  return out;
}

Result<ToolChoiceGrammar> ToolChoiceGrammarFor(ToolCallFormat format,
                                               const std::vector<ToolSpec>& tools) {
  if (format == ToolCallFormat::kNone) {
    return InvalidArgument("this model's chat template shows no tool-call syntax");
  }
  const char* args_key = format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
  json alternatives = json::array();
  for (const ToolSpec& t : tools) {
    json parameters = json::parse(t.parameters, nullptr, false);
    if (parameters.is_discarded()) parameters = json{{"type", "object"}};
    alternatives.push_back({{"type", "object"},
                            {"properties", {{"name", {{"const", t.name}}}, {args_key, parameters}}},
                            {"required", {"name", args_key}},
                            {"additionalProperties", false}});
  }
  json call = alternatives.size() == 1 ? alternatives[0] : json{{"anyOf", alternatives}};
  switch (format) {
    case ToolCallFormat::kHermes:
      return ToolChoiceGrammar{"<tool_call>\n", call.dump(), "\n</tool_call>"};
    case ToolCallFormat::kMistral:
      return ToolChoiceGrammar{
          std::string(kMistralMarker),
          json{{"type", "array"}, {"items", call}, {"minItems", 1}, {"maxItems", 1}}.dump(), ""};
    default:
      return ToolChoiceGrammar{"", call.dump(), ""};
  }
}

}  // namespace pdserve::gateway
