#include "bench/serve/sse_parser.h"
#include "common/json_text.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pdserve::bench {

namespace {

using nlohmann::json;

// A server's events and error bodies nest a few levels; one nesting thousands deep is refused
// before parsing, so that nothing later walks it recursively (dump() would overflow the stack).
constexpr int kMaxNesting = 64;

void AppendString(const json& object, const char* key, std::string& out) {
  auto it = object.find(key);
  if (it != object.end() && it->is_string()) out += it->get_ref<const std::string&>();
}

// A token count: a negative one is no count (taken at face value, it made totals negative).
std::optional<int64_t> IntField(const json& object, const char* key) {
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
  return DumpJson(error);  // shallow: the JSON was refused past kMaxNesting
}

}  // namespace

Result<StreamChunk> ParseStreamChunk(std::string_view data) {
  StreamChunk chunk;
  std::string_view trimmed = data;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) {
    trimmed.remove_suffix(1);
  }
  if (trimmed == "[DONE]") {
    chunk.done = true;
    return chunk;
  }
  if (JsonNestingDepth(trimmed) > kMaxNesting) {
    return InvalidArgument(
        fmt::format("SSE data nests arrays and objects more than {} deep", kMaxNesting));
  }
  json doc = json::parse(trimmed.begin(), trimmed.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return InvalidArgument(fmt::format("SSE data is not JSON: '{}'",
                                       trimmed.substr(0, std::min<size_t>(200, trimmed.size()))));
  }
  if (!doc.is_object()) return InvalidArgument("SSE data is JSON but not an object");
  if (auto it = doc.find("error"); it != doc.end() && !it->is_null()) {
    chunk.error = ErrorText(*it);
    return chunk;
  }
  if (auto it = doc.find("choices"); it != doc.end() && it->is_array() && !it->empty()) {
    chunk.has_choice = true;
    const json& choice = (*it)[0];
    if (choice.is_object()) {
      AppendString(choice, "text", chunk.text);
      if (auto delta = choice.find("delta"); delta != choice.end() && delta->is_object()) {
        AppendString(*delta, "reasoning_content", chunk.text);
        AppendString(*delta, "content", chunk.text);
      }
    }
  }
  if (auto it = doc.find("usage"); it != doc.end() && it->is_object()) {
    chunk.prompt_tokens = IntField(*it, "prompt_tokens");
    chunk.completion_tokens = IntField(*it, "completion_tokens");
  }
  return chunk;
}

std::string ErrorMessageFromBody(std::string_view body, size_t max_len) {
  json doc = JsonNestingDepth(body) > kMaxNesting
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

}  // namespace pdserve::bench
