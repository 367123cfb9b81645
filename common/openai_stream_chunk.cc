#include "common/openai_stream_chunk.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_text.h"

namespace pdserve {
namespace {

using nlohmann::json;

// An OpenAI answer nests a few levels; one nested thousands deep is refused before parsing, so
// that nothing later walks it recursively (dump() would overflow the stack).
constexpr int kMaxNesting = 64;

void AppendString(const json& object, const char* key, std::string& out) {
  if (!object.is_object()) return;
  auto it = object.find(key);
  if (it != object.end() && it->is_string()) out += it->get_ref<const std::string&>();
}

// A token count: a negative one is no count (taken at face value, it made totals negative).
std::optional<int64_t> Count(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer() || it->get<int64_t>() < 0) {
    return std::nullopt;
  }
  return it->get<int64_t>();
}

std::string ErrorText(const json& error) {
  if (error.is_string()) return error.get<std::string>();
  if (error.is_object()) {
    auto it = error.find("message");
    if (it != error.end() && it->is_string()) return it->get<std::string>();
  }
  return DumpJson(error);  // shallow: deeper JSON was refused past kMaxNesting
}

// `holder`: "delta" in a stream, "message" in a whole response.
Result<OpenAiChunk> ReadChunk(std::string_view text, const char* holder, bool keep_choices) {
  if (JsonNestingDepth(text) > kMaxNesting) {
    return InvalidArgument(
        fmt::format("the JSON nests arrays and objects more than {} deep", kMaxNesting));
  }
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return InvalidArgument(
        fmt::format("not JSON: '{}'", text.substr(0, std::min<size_t>(200, text.size()))));
  }
  if (!doc.is_object()) return InvalidArgument("JSON but not an object");
  OpenAiChunk chunk;
  if (auto it = doc.find("error"); it != doc.end() && !it->is_null()) {
    chunk.error = ErrorText(*it);
    return chunk;
  }
  if (auto it = doc.find("choices"); it != doc.end() && it->is_array() && !it->empty()) {
    chunk.has_choice = true;
    if (keep_choices) chunk.choices = DumpJson(*it);
    const json& choice = (*it)[0];
    if (choice.is_object()) {
      AppendString(choice, "text", chunk.text);
      if (auto d = choice.find(holder); d != choice.end()) {
        AppendString(*d, "content", chunk.text);
        AppendString(*d, "reasoning_content", chunk.reasoning_text);
      }
      AppendString(choice, "finish_reason", chunk.finish_reason);
    }
  }
  if (auto it = doc.find("usage"); it != doc.end() && it->is_object()) {
    chunk.prompt_tokens = Count(*it, "prompt_tokens");
    chunk.completion_tokens = Count(*it, "completion_tokens");
    if (auto d = it->find("prompt_tokens_details"); d != it->end() && d->is_object()) {
      chunk.cached_prompt_tokens = Count(*d, "cached_tokens");
    }
  }
  return chunk;
}

}  // namespace

Result<OpenAiChunk> ParseOpenAiStreamData(std::string_view data, bool keep_choices) {
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) {
    trimmed.remove_suffix(1);
  }
  if (trimmed == "[DONE]") {
    OpenAiChunk chunk;
    chunk.done = true;
    return chunk;
  }
  return ReadChunk(trimmed, "delta", keep_choices);
}

Result<OpenAiChunk> ParseOpenAiResponse(std::string_view body, bool keep_choices) {
  return ReadChunk(body, "message", keep_choices);
}

std::string OpenAiErrorMessage(std::string_view body, size_t max_len) {
  const json doc = JsonNestingDepth(body) > kMaxNesting
                       ? json(json::value_t::discarded)
                       : json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded() && doc.is_object()) {
    if (auto it = doc.find("error"); it != doc.end()) return ErrorText(*it).substr(0, max_len);
    if (auto it = doc.find("message"); it != doc.end() && it->is_string()) {
      return it->get<std::string>().substr(0, max_len);
    }
  }
  std::string text(body.substr(0, max_len));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace pdserve
