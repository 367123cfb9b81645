// Parsing and validating OpenAI request bodies for POST /v1/completions and
// POST /v1/chat/completions (plus vLLM's `ignore_eos` and `top_k`, which load tests rely on, and
// its `return_token_ids`, with which tests compare served tokens by id).
// Every refusal is an ApiError that names the field at fault. Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gateway/api_error.h"
#include "gateway/sampling_defaults.h"

namespace pdserve::gateway {

enum class Endpoint { kCompletions, kChatCompletions };

struct ChatTurn {
  std::string role;  // system, developer, user or assistant
  std::string content;
};

struct GenerationRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  // Completions: the prompt as text, or as token ids when the client sent ids.
  std::string prompt;
  std::optional<std::vector<int32_t>> prompt_token_ids;
  // Chat: the conversation.
  std::vector<ChatTurn> messages;

  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  std::optional<int> max_tokens;  // max_tokens or max_completion_tokens; absent: up to the context
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  // vLLM's return_token_ids: the response carries the prompt's token ids and the completion's
  // (every generated id, as many as usage.completion_tokens; streamed, each chunk its new ones).
  bool return_token_ids = false;
  std::string user;  // OpenAI's end-user id; the ledger keeps it as a tag
  // response_format json_object or json_schema: the JSON Schema the output follows, compiled
  // once here to check it (grammar/json_grammar.h), as compact text; empty: free text.
  std::string json_schema;
};

struct ParseOptions {
  int max_stop_strings = 4;  // as OpenAI
  int max_tokens_limit = 1 << 20;
  // What temperature, top_p, top_k and max_tokens are when the request does not set them.
  SamplingDefaults sampling;
};

// Parses a body. A variant: the request, or the 400 that says what is wrong.
std::variant<GenerationRequest, ApiError> ParseGenerationRequest(std::string_view body,
                                                                 Endpoint endpoint,
                                                                 const ParseOptions& options = {});

}  // namespace pdserve::gateway
