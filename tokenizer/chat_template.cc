#include "tokenizer/chat_template.h"

namespace pdserve::model {
namespace {

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

}  // namespace pdserve::model
