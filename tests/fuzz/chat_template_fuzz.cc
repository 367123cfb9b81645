// Fuzz target: chat templates (tokenizer/chat_template.h): a tokenizer_config.json's template
// text parsed and rendered by the Jinja engine, the built-in family recognised from it, then a
// conversation a client sent formatted with each. Input, split at NUL bytes: the template text,
// the bos token, then one message per part, its role before the first newline and its content
// after.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/chat_template.h"

namespace {

std::vector<std::string_view> SplitAtNul(std::string_view text) {
  std::vector<std::string_view> parts;
  for (;;) {
    const size_t nul = text.find('\0');
    parts.push_back(text.substr(0, nul));
    if (nul == std::string_view::npos) return parts;
    text.remove_prefix(nul + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using pdserve::tokenizer::ChatFormat;
  using pdserve::tokenizer::ChatMessage;
  using pdserve::tokenizer::ChatTemplate;
  const auto parts = SplitAtNul(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string_view bos = parts.size() > 1 ? parts[1] : std::string_view();
  std::vector<ChatMessage> messages;
  for (size_t i = 2; i < parts.size(); ++i) {
    const size_t newline = parts[i].find('\n');
    ChatMessage m;
    m.role = std::string(parts[i].substr(0, newline));
    if (newline != std::string_view::npos) m.content = std::string(parts[i].substr(newline + 1));
    messages.push_back(std::move(m));
  }
  // The vocab holds a special token when the template text names it.
  auto has_token = [&](std::string_view token) {
    return parts[0].find(token) != std::string_view::npos;
  };
  // The model's own template: parse errors and render errors are fine, crashes and hangs not.
  auto jinja =
      ChatTemplate::FromJinja(parts[0], "fuzz", {{"bos_token", std::string(bos)}}, has_token);
  if (jinja.ok()) {
    for (bool add_generation_prompt : {false, true}) {
      (void)jinja->Apply(messages, add_generation_prompt);
    }
  }
  const ChatTemplate detected = ChatTemplate::Detect(parts[0], has_token, bos);
  for (const ChatTemplate& t :
       {detected, ChatTemplate::Llama3(std::string(bos)), ChatTemplate::ChatMl(std::string(bos))}) {
    (void)t.name();
    (void)t.end_of_turn_token();
    for (bool add_generation_prompt : {false, true}) {
      auto prompt = t.Apply(messages, add_generation_prompt);
      if (!prompt.ok()) continue;
      if (t.format() == ChatFormat::kNone) abort();  // no template formats nothing
      // Every message's content is in the prompt (Llama-3 trims it).
      for (const auto& m : messages) {
        const size_t first = m.content.find_first_not_of(" \t\n\r\v\f");
        const size_t last = m.content.find_last_not_of(" \t\n\r\v\f");
        if (first == std::string::npos) continue;
        if (prompt->find(m.content.substr(first, last - first + 1)) == std::string::npos) abort();
      }
    }
  }
  return 0;
}
