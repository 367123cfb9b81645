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
#include "gateway/tool_calls.h"

namespace pdserve::gateway {

enum class Endpoint { kCompletions, kChatCompletions };

struct ChatTurn {
  std::string role;  // system, developer, user, assistant or tool
  std::string content;
  bool null_content = false;    // an assistant turn of tool calls only
  std::string tool_calls_json;  // an assistant's tool_calls, compact JSON; empty: none
  std::string tool_call_id;     // a tool turn's: the call it answers
  std::string name;             // a tool turn's function name, where sent
};

// tool_choice: none (tools, if any, are only shown to the model), auto (the model may call
// them), required (it must call one), or one function by name (it must call that one).
enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

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
  // Fixed text around the schema's value: a forced tool call's syntax ("<tool_call>\n", ...).
  std::string json_prefix, json_suffix;
  // The most likely tokens to report beside each token's log-probability (chat: top_logprobs
  // with logprobs true; completions: logprobs); -1: no log-probabilities.
  int logprobs = -1;
  // OpenAI's n: choices of the one prompt, each with its index (its own seed + index where a
  // seed is set). They run on one worker that prefills the prompt once (Sampling.n).
  int n = 1;
  // Completions' echo: each choice's text starts with the prompt's (as sent; ids decoded), and
  // with logprobs its entries with the prompt's tokens' (the first's null).
  bool echo = false;
  // OpenAI's logit_bias: token ids and the bias (-100..100) added to their logits.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Chat's tools (functions): as sent, compact JSON in order (the chat template's `tools`), and
  // each function's name and parameters schema. Empty: none.
  std::string tools_json;
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_choice_name;     // kNamed: the function
  bool parallel_tool_calls = true;  // false: one call at most
  // Where the output may hold calls (tools, tool_choice not none): the model's syntax for them.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
};

struct ParseOptions {
  int max_stop_strings = 4;  // as OpenAI
  int max_tokens_limit = 1 << 20;
  // What temperature, top_p, top_k and max_tokens are when the request does not set them.
  SamplingDefaults sampling;
  // The tokenizer's ids (logit_bias names ids below it); 0: not checked.
  int vocab_size = 0;
  int max_logit_bias = 1024;  // tokens logit_bias may name
  // The served model's tool-call syntax (from its chat template): what tool_choice required or
  // a named function constrain the output to; kNone refuses them.
  ToolCallFormat tool_call_format = ToolCallFormat::kNone;
};

// Parses a body. A variant: the request, or the 400 that says what is wrong.
std::variant<GenerationRequest, ApiError> ParseGenerationRequest(std::string_view body,
                                                                 Endpoint endpoint,
                                                                 const ParseOptions& options = {});

// Whether an external upstream's answer to `request` is relayed as the upstream wrote its
// choices (tool calls, logprobs, several choices, echo: what pdserve's own rendering of the
// upstream's text would lose or repeat) rather than re-rendered from its text.
bool RelaysUpstreamChoices(const GenerationRequest& request);

}  // namespace pdserve::gateway
