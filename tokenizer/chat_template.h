// Chat prompt formatting. A model that ships a chat template (tokenizer_config.json's Jinja
// "chat_template", or a chat_template.jinja file beside it, which wins as in transformers) gets
// its own template rendered by pdserve's Jinja engine (jinja/template.h) exactly as
// transformers' apply_chat_template renders it: with the messages, add_generation_prompt,
// tools=None, documents=None and the config's special tokens. A model directory without one
// gets a built-in format picked by its vocab's special tokens: Llama-3
// (<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>) or ChatML (Qwen2:
// <|im_start|>role\ncontent<|im_end|>\n). Either way the prompt family (format()) is recognised
// from the template's markers or the vocab, and names the end-of-turn token a generation stops
// on. Immutable value type: safe for concurrent const use from any thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace pdserve::jinja {
class Template;
}

namespace pdserve::tokenizer {

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool" (templates may accept others)
  // An assistant turn that only calls tools has content "" (its null, as vLLM passes it: Qwen3's
  // template, for one, cannot take None).
  std::string content;
  // An assistant's tool calls as OpenAI writes them (a JSON array of {id, type, function:
  // {name, arguments}}); empty: none. Each arguments string that holds JSON is given to the
  // template parsed, as vLLM does, for templates that write `arguments | tojson`.
  std::string tool_calls_json;
  std::string tool_call_id;  // a tool message's: the call it answers
  std::string name;          // a tool message's function name, where the client sent one
};

// The prompt family, from the template's markers or the vocab's special tokens.
enum class ChatFormat { kNone, kLlama3, kChatMl };

class ChatTemplate {
 public:
  // No template: Apply fails with FailedPrecondition.
  ChatTemplate() = default;
  // Built-in Llama-3: the prompt opens with `bos_token` (so encode it with add_special = false)
  // and each message's content is trimmed of surrounding whitespace, as Meta's template does.
  static ChatTemplate Llama3(std::string bos_token = "<|begin_of_text|>");
  // Built-in ChatML: `default_system`, when not empty, is sent as the system message if the
  // conversation does not open with one (Qwen2 templates do this).
  static ChatTemplate ChatMl(std::string default_system = "");

  // Picks a built-in format from `template_text` (a chat template's text; empty when absent)
  // by its markers and, when it names none, from `has_token` (does the vocab hold this special
  // token?). `bos_token` is tokenizer_config.json's bos_token, if any. Renders no Jinja: this is
  // the fallback for models without a template, and how format() is recognised.
  static ChatTemplate Detect(std::string_view template_text,
                             const std::function<bool(std::string_view)>& has_token,
                             std::string_view bos_token);

  // The model's own Jinja template `text`, rendered with `special_tokens` (name, text pairs such
  // as {"bos_token", "<s>"}; the names a config leaves out are undefined in the template).
  // `origin` names it in errors. A template that does not parse, or uses what the engine does
  // not support, is InvalidArgument "ORIGIN:LINE: message".
  static Result<ChatTemplate> FromJinja(
      std::string_view text, std::string_view origin,
      std::vector<std::pair<std::string, std::string>> special_tokens,
      const std::function<bool(std::string_view)>& has_token);

  // The template for a model from its tokenizer_config.json (`config`, a JSON object):
  // `chat_template_file`'s text when not empty (chat_template.jinja, named `file_origin`), else
  // the config's "chat_template" (a string, or the entry named "default" of a list of
  // {name, template}; without one, the first), rendered with the config's bos_token,
  // eos_token, unk_token and pad_token (strings or {"content": ...}); without a template, the
  // built-in format Detect picks.
  static Result<ChatTemplate> ForModel(const nlohmann::json& config,
                                       std::string_view chat_template_file,
                                       std::string_view file_origin,
                                       const std::function<bool(std::string_view)>& has_token);

  ChatFormat format() const { return format_; }
  // "llama3", "chatml" or "none": the family.
  std::string_view name() const;
  // True when Apply renders the model's own Jinja template.
  bool has_model_template() const { return jinja_ != nullptr; }
  // That template's text (empty for a built-in format): what shows a model's tool-call syntax.
  const std::string& source() const { return source_; }
  // The token that closes a turn ("<|eot_id|>", "<|im_end|>"); a generation stops on it.
  std::optional<std::string_view> end_of_turn_token() const;

  // The prompt text for `messages`; with `add_generation_prompt` the template ends it with the
  // assistant's header so the model writes the reply. With the model's template, a render
  // error (the template's raise_exception, e.g. for roles that do not alternate) is
  // InvalidArgument carrying the template's message. With a built-in format, unknown roles are
  // InvalidArgument naming the role and the message index. Without a template:
  // FailedPrecondition.
  Result<std::string> Apply(std::span<const ChatMessage> messages,
                            bool add_generation_prompt) const;
  // The same with `tools_json`, the request's tools as a JSON array (OpenAI's {type: function,
  // function: {name, description, parameters}}), passed as transformers' `tools` argument;
  // empty: tools=None. A built-in format, which has no tool syntax, refuses tools
  // (InvalidArgument).
  Result<std::string> Apply(std::span<const ChatMessage> messages, bool add_generation_prompt,
                            std::string_view tools_json) const;

 private:
  Result<std::string> ApplyBuiltIn(std::span<const ChatMessage> messages,
                                   bool add_generation_prompt) const;

  ChatFormat format_ = ChatFormat::kNone;
  std::string bos_token_;                                            // built-in Llama-3 only
  std::string default_system_;                                       // built-in ChatML only
  std::shared_ptr<const jinja::Template> jinja_;                     // the model's own template
  std::vector<std::pair<std::string, std::string>> special_tokens_;  // for jinja_
  std::string source_;                                               // jinja_'s text
};

}  // namespace pdserve::tokenizer
