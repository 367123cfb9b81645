// Fuzz target: loading a tokenizer (tokenizer/tokenizer.h) from the text of tokenizer.json and,
// after a NUL byte, tokenizer_config.json and, after another, generation_config.json, as
// `pdserve` reads a model directory someone else published. A tokenizer either loads and then
// encodes, decodes and formats chats without fault, or is refused with an error naming the file.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view parts[3];
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  for (int i = 0; i < 3; ++i) {
    const size_t nul = i < 2 ? rest.find('\0') : std::string_view::npos;
    parts[i] = rest.substr(0, nul);
    rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
  }
  auto loaded = pdserve::tokenizer::Tokenizer::FromJsonText(parts[0], parts[1], "fuzz", parts[2]);
  if (!loaded.ok()) {
    if (loaded.status().message().find("fuzz") == std::string::npos) abort();
    return 0;
  }
  const auto& tokenizer = **loaded;
  for (std::string_view text : {"Hello, world! 123", " <|eot_id|>\n\n  x", "\xc3\xa9t\xc3\xa9 "}) {
    for (bool add_special : {false, true}) {
      auto ids = tokenizer.Encode(text, add_special);
      if (!ids.ok()) continue;
      for (int32_t id : *ids) {
        if (id < 0 || id >= tokenizer.vocab_size()) abort();
        (void)tokenizer.TokenBytes(id);
        (void)tokenizer.TokenText(id);
      }
      (void)tokenizer.Decode(*ids, /*skip_special=*/true);
      (void)tokenizer.Decode(*ids, /*skip_special=*/false);
    }
  }
  const std::vector<pdserve::tokenizer::ChatMessage> chat = {{"system", " Be brief. "},
                                                             {"user", "Hi <|im_end|>"}};
  (void)tokenizer.chat_template().Apply(chat, /*add_generation_prompt=*/true);
  const std::vector<int32_t> out_of_range = {-1, tokenizer.vocab_size(), 0, 1 << 30};
  (void)tokenizer.Decode(out_of_range, false);
  return 0;
}
