// Chat prompt formatting for the two template families pdserve serves: Llama-3
// (<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>) and ChatML (Qwen2:
// <|im_start|>role\ncontent<|im_end|>\n). The family is recognised from tokenizer_config.json's
// Jinja "chat_template" text by its markers, or else from which special tokens the vocab has; no
// Jinja engine runs. Immutable value type: safe for concurrent const use from any thread.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pdserve::model {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

enum class ChatFormat { kNone, kLlama3, kChatMl };

class ChatTemplate {
 public:
  // No template: Apply fails with FailedPrecondition.
  ChatTemplate() = default;
  // Llama-3: the prompt opens with `bos_token` (so encode it with add_special = false) and each
  // message's content is trimmed of surrounding whitespace, as Meta's template does.
  static ChatTemplate Llama3(std::string bos_token = "<|begin_of_text|>");
  // ChatML: `default_system`, when not empty, is sent as the system message if the
  // conversation does not open with one (Qwen2 templates do this).
  static ChatTemplate ChatMl(std::string default_system = "");

  // Picks the family from `template_text` (tokenizer_config.json's chat_template; empty when
  // absent) and, when that names no known markers, from `has_token` (does the vocab hold this
  // special token?). `bos_token` is tokenizer_config.json's bos_token, if any.
  static ChatTemplate Detect(std::string_view template_text,
                             const std::function<bool(std::string_view)>& has_token,
                             std::string_view bos_token);

  ChatFormat format() const { return format_; }
  // "llama3", "chatml" or "none".
  std::string_view name() const;
  // The token that closes a turn ("<|eot_id|>", "<|im_end|>"); a generation stops on it.
  std::optional<std::string_view> end_of_turn_token() const;

  // The prompt text for `messages`; with `add_generation_prompt` it ends with the assistant's
  // header so the model writes the reply. Unknown roles are InvalidArgument naming the role and
  // the message index; kNone is FailedPrecondition.
  Result<std::string> Apply(std::span<const ChatMessage> messages,
                            bool add_generation_prompt) const;

 private:
  ChatFormat format_ = ChatFormat::kNone;
  std::string bos_token_;       // Llama-3 only
  std::string default_system_;  // ChatML only
};

}  // namespace pdserve::model
