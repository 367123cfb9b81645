#include "tokenizer/chat_template.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "jinja/builtins.h"
#include "jinja/template.h"

namespace pdserve::tokenizer {
namespace {

// The special tokens transformers passes to a chat template (its special_tokens_map), as
// tokenizer_config.json writes them: "text" or {"content": "text", ...}.
constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "pad_token"};

std::optional<std::string> TokenText(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return std::nullopt;
}

// tokenizer_config.json's chat_template: a string, or a list of {name, template} whose
// "default" entry (else its first) is used; empty when there is none.
std::string ConfigTemplateText(const nlohmann::json& config) {
  auto it = config.find("chat_template");
  if (it == config.end()) return {};
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array()) {
    std::string first;
    for (const nlohmann::json& entry : *it) {
      if (!entry.is_object()) continue;
      std::string text = entry.value("template", std::string());
      if (entry.value("name", std::string()) == "default") return text;
      if (first.empty()) first = text;
    }
    return first;
  }
  return {};
}

bool IsKnownRole(std::string_view role) {
  return role == "system" || role == "user" || role == "assistant";
}

// Jinja's `trim`: Python's str.strip(), i.e. whitespace at both ends.
std::string_view Trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  size_t end = s.find_last_not_of(kSpace);
  return s.substr(begin, end - begin + 1);
}

}  // namespace

ChatTemplate ChatTemplate::Llama3(std::string bos_token) {
  ChatTemplate t;
  t.format_ = ChatFormat::kLlama3;
  t.bos_token_ = std::move(bos_token);
  return t;
}

ChatTemplate ChatTemplate::ChatMl(std::string default_system) {
  ChatTemplate t;
  t.format_ = ChatFormat::kChatMl;
  t.default_system_ = std::move(default_system);
  return t;
}

Result<ChatTemplate> ChatTemplate::FromJinja(
    std::string_view text, std::string_view origin,
    std::vector<std::pair<std::string, std::string>> special_tokens,
    const std::function<bool(std::string_view)>& has_token) {
  PDSERVE_ASSIGN_OR_RETURN(jinja::Template parsed, jinja::Template::Parse(text, origin));
  parsed.AddFunction("raise_exception", jinja::RaiseExceptionFunction());
  parsed.AddFunction("strftime_now", jinja::StrftimeNowFunction());
  std::string bos;
  for (const auto& [name, value] : special_tokens) {
    if (name == "bos_token") bos = value;
  }
  ChatTemplate t = Detect(text, has_token, bos);
  t.jinja_ = std::make_shared<const jinja::Template>(std::move(parsed));
  t.special_tokens_ = std::move(special_tokens);
  t.source_ = std::string(text);
  return t;
}

Result<ChatTemplate> ChatTemplate::ForModel(
    const nlohmann::json& config, std::string_view chat_template_file, std::string_view file_origin,
    const std::function<bool(std::string_view)>& has_token) {
  std::vector<std::pair<std::string, std::string>> special_tokens;
  for (const char* name : kSpecialTokenNames) {
    if (auto text = TokenText(config, name)) special_tokens.emplace_back(name, std::move(*text));
  }
  if (!chat_template_file.empty()) {
    return FromJinja(chat_template_file, file_origin, std::move(special_tokens), has_token);
  }
  std::string text = ConfigTemplateText(config);
  if (!text.empty()) {
    return FromJinja(text, "tokenizer_config.json's chat_template", std::move(special_tokens),
                     has_token);
  }
  return Detect("", has_token, TokenText(config, "bos_token").value_or(""));
}

ChatTemplate ChatTemplate::Detect(std::string_view template_text,
                                  const std::function<bool(std::string_view)>& has_token,
                                  std::string_view bos_token) {
  std::string bos = bos_token.empty() ? "<|begin_of_text|>" : std::string(bos_token);
  bool llama3 = template_text.find("<|start_header_id|>") != std::string_view::npos;
  bool chatml = template_text.find("<|im_start|>") != std::string_view::npos;
  if (!llama3 && !chatml) {
    llama3 = has_token("<|start_header_id|>") && has_token("<|eot_id|>");
    chatml = !llama3 && has_token("<|im_start|>") && has_token("<|im_end|>");
  }
  if (llama3) {
    // Meta's template writes bos_token only when the tokenizer defines one.
    return Llama3(has_token(bos) ? bos : "");
  }
  if (chatml) {
    // Qwen2 templates inject a default system prompt; take it over when we know the text.
    for (std::string_view known : {
             "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
             "You are a helpful assistant.",
         }) {
      if (template_text.find(known) != std::string_view::npos) return ChatMl(std::string(known));
    }
    return ChatMl();
  }
  return ChatTemplate();
}

std::string_view ChatTemplate::name() const {
  switch (format_) {
    case ChatFormat::kLlama3:
      return "llama3";
    case ChatFormat::kChatMl:
      return "chatml";
    case ChatFormat::kNone:
      break;
  }
  return "none";
}

std::optional<std::string_view> ChatTemplate::end_of_turn_token() const {
  switch (format_) {
    case ChatFormat::kLlama3:
      return "<|eot_id|>";
    case ChatFormat::kChatMl:
      return "<|im_end|>";
    case ChatFormat::kNone:
      break;
  }
  return std::nullopt;
}

Result<std::string> ChatTemplate::Apply(std::span<const ChatMessage> messages,
                                        bool add_generation_prompt) const {
  return Apply(messages, add_generation_prompt, {});
}

Result<std::string> ChatTemplate::Apply(std::span<const ChatMessage> messages,
                                        bool add_generation_prompt,
                                        std::string_view tools_json) const {
  using ordered_json = nlohmann::ordered_json;
  const bool any_tools =
      !tools_json.empty() || std::any_of(messages.begin(), messages.end(), [](const auto& m) {
        return !m.tool_calls_json.empty() || !m.tool_call_id.empty();
      });
  if (jinja_ == nullptr) {
    if (any_tools) {
      return InvalidArgument("this model's built-in chat format has no syntax for tools");
    }
    return ApplyBuiltIn(messages, add_generation_prompt);
  }
  // What transformers passes: the special tokens, then messages, tools, documents=None and
  // add_generation_prompt.
  ordered_json variables = ordered_json::object();
  for (const auto& [name, value] : special_tokens_) variables[name] = value;
  ordered_json list = ordered_json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    ordered_json message{{"role", m.role}};
    message["content"] = m.content;
    if (!m.tool_calls_json.empty()) {
      ordered_json calls = ordered_json::parse(m.tool_calls_json, nullptr, false);
      if (!calls.is_array()) {
        return InvalidArgument("messages[" + std::to_string(i) + "].tool_calls is not an array");
      }
      for (auto& call : calls) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object()) {
          continue;
        }
        auto& function = call["function"];
        if (function.contains("arguments") && function["arguments"].is_string()) {
          auto parsed =
              ordered_json::parse(function["arguments"].get<std::string>(), nullptr, false);
          if (!parsed.is_discarded()) function["arguments"] = std::move(parsed);
        }
      }
      message["tool_calls"] = std::move(calls);
    }
    if (!m.tool_call_id.empty()) message["tool_call_id"] = m.tool_call_id;
    if (!m.name.empty()) message["name"] = m.name;
    list.push_back(std::move(message));
  }
  variables["messages"] = std::move(list);
  if (tools_json.empty()) {
    variables["tools"] = nullptr;
  } else {
    ordered_json tools = ordered_json::parse(tools_json, nullptr, false);
    if (!tools.is_array()) return InvalidArgument("tools is not a JSON array");
    variables["tools"] = std::move(tools);
  }
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = add_generation_prompt;
  return jinja_->Render(variables);
}

Result<std::string> ChatTemplate::ApplyBuiltIn(std::span<const ChatMessage> messages,
                                               bool add_generation_prompt) const {
  if (format_ == ChatFormat::kNone) {
    return FailedPrecondition(
        "this tokenizer has no chat template pdserve recognises (Llama-3 or ChatML)");
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!IsKnownRole(messages[i].role)) {
      return InvalidArgument("messages[" + std::to_string(i) + "]: unknown role \"" +
                             messages[i].role + "\" (expected system, user or assistant)");
    }
  }
  std::string prompt;
  if (format_ == ChatFormat::kLlama3) {
    prompt += bos_token_;
    for (const ChatMessage& m : messages) {
      prompt += "<|start_header_id|>";
      prompt += m.role;
      prompt += "<|end_header_id|>\n\n";
      prompt += Trim(m.content);
      prompt += "<|eot_id|>";
    }
    if (add_generation_prompt) prompt += "<|start_header_id|>assistant<|end_header_id|>\n\n";
    return prompt;
  }
  auto append = [&prompt](std::string_view role, std::string_view content) {
    prompt += "<|im_start|>";
    prompt += role;
    prompt += '\n';
    prompt += content;
    prompt += "<|im_end|>\n";
  };
  if (!default_system_.empty() && (messages.empty() || messages.front().role != "system")) {
    append("system", default_system_);
  }
  for (const ChatMessage& m : messages) append(m.role, m.content);
  if (add_generation_prompt) prompt += "<|im_start|>assistant\n";
  return prompt;
}

}  // namespace pdserve::tokenizer
