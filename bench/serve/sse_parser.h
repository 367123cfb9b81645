// The load generator's reading of an OpenAI-style streamed response: the JSON of one `data:`
// payload (ParseStreamChunk; the events come from common/sse_parser.h) and an error body's
// message. Pure functions: any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/sse_parser.h"
#include "common/status.h"

namespace pdserve::bench {

// One `data:` payload of an OpenAI completions or chat completions stream.
struct StreamChunk {
  bool done = false;        // the payload was [DONE]
  bool has_choice = false;  // carried a non-empty `choices` array (a token chunk)
  std::string text;         // choices[0].text or choices[0].delta.content (+ reasoning_content)
  std::optional<int64_t> prompt_tokens;      // usage.prompt_tokens
  std::optional<int64_t> completion_tokens;  // usage.completion_tokens
  std::optional<std::string> error;          // an `error` object's message: the stream failed
};

// Never throws; malformed JSON or a non-object payload is an InvalidArgument.
Result<StreamChunk> ParseStreamChunk(std::string_view data);

// The message of an OpenAI error body ({"error":{"message":...}}), else the body itself trimmed
// to `max_len` bytes.
std::string ErrorMessageFromBody(std::string_view body, size_t max_len = 512);

}  // namespace pdserve::bench
