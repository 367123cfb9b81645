// Reading what an OpenAI-compatible server answers: one `data:` payload of a streamed
// completions or chat completions response (the events themselves come from
// common/sse_parser.h), a whole non-streamed response body, and an error body's message. The
// load generator (bench/serve) reads the servers it measures with it, and the gateway
// (gateway/external_call) the external upstreams it relays. Nothing a server sends can crash
// it: JSON nested deeper than any OpenAI answer is refused before it is parsed, and odd shapes
// (a field of the wrong type) read as absent. Pure functions: safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pdserve {

// What one streamed chunk, or a whole response, carries. Only choices[0] is read.
struct OpenAiChunk {
  bool done = false;        // the payload was [DONE] (trailing spaces and newlines ignored)
  bool has_choice = false;  // a non-empty `choices` array: a token chunk, even without text
  // choices[0].text, and choices[0].delta.content (a stream) or .message.content (a whole
  // response).
  std::string text;
  std::string reasoning_text;  // choices[0].delta (or .message).reasoning_content
  std::string finish_reason;   // choices[0].finish_reason; "" while none
  // usage.prompt_tokens and usage.completion_tokens when present; a negative count is none.
  std::optional<int64_t> prompt_tokens, completion_tokens;
  // usage.prompt_tokens_details.cached_tokens: prompt tokens the server took from its prefix
  // cache; a negative count is none.
  std::optional<int64_t> cached_prompt_tokens;
  // With keep_choices: the `choices` array as sent (compact JSON; keys may be reordered) when it
  // has any, for a relay to pass on.
  std::string choices;
  // An `error` member's message (its `message` field, or itself when a string, else its JSON):
  // the stream failed. The other fields are then empty.
  std::optional<std::string> error;
};

// One `data:` payload of a stream. InvalidArgument when it is neither [DONE] nor a JSON object.
Result<OpenAiChunk> ParseOpenAiStreamData(std::string_view data, bool keep_choices = false);

// A whole (non-streamed) response body. InvalidArgument when it is not a JSON object.
Result<OpenAiChunk> ParseOpenAiResponse(std::string_view body, bool keep_choices = false);

// The message of an OpenAI error body ({"error":{"message":...}}, {"error":"..."} or
// {"message":...}), else the body itself without trailing line ends; at most `max_len` bytes.
std::string OpenAiErrorMessage(std::string_view body, size_t max_len = 512);

}  // namespace pdserve
