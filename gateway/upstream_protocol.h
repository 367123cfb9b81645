// What the gateway says to an external OpenAI-compatible upstream and how it reads the answer
// (router/external_upstream.h, gateway/external_call.h): the request body sent upstream (the
// client's own, with the upstream's model, usage asked for, and pdserve's vLLM-only fields
// dropped) and an upstream's error answer mapped to our error object. Its streamed chunks and
// whole responses are read by common/openai_stream_chunk.h. Pure functions and value types: any
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "gateway/api_error.h"
#include "gateway/openai_request.h"

namespace pdserve::gateway {

// The body to send upstream: `client_body` (already validated by ParseGenerationRequest) with
// `model`, stream_options.include_usage when streaming (the ledger prices the usage it reports),
// and without vLLM's ignore_eos, top_k and return_token_ids, which OpenAI's API refuses.
Result<std::string> UpstreamRequestBody(std::string_view client_body, const std::string& model,
                                        bool stream);

// Whether a request can be served by an upstream at all: token ids (in the prompt or asked for
// in the answer) are this model's, not the upstream's. Empty: it can; else why not.
std::string WhyNotExternal(const GenerationRequest& request);

// An upstream's non-200 answer as the error the client gets: 429 stays 429 (rate limited), 400
// stays 400 (the request itself is at fault), anything else is 502; the message names the
// upstream and carries its own message (common/openai_stream_chunk.h's OpenAiErrorMessage).
ApiError UpstreamError(const std::string& upstream, int http_status, std::string_view body);
// Whether trying another upstream (or self-hosted workers) may help after that answer.
bool RetryableUpstreamStatus(int http_status);

}  // namespace pdserve::gateway
