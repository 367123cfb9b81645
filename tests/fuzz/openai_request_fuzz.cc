// Fuzz target: OpenAI request bodies (gateway/openai_request.h), as a client sends them to
// POST /v1/completions and /v1/chat/completions. Every body must parse or be refused with a 400
// that says what is wrong; an accepted request must hold values within the limits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "gateway/openai_request.h"

namespace {

using pdserve::gateway::ApiError;
using pdserve::gateway::Endpoint;
using pdserve::gateway::GenerationRequest;
using pdserve::gateway::ParseGenerationRequest;
using pdserve::gateway::ParseOptions;

void Check(std::string_view body, Endpoint endpoint) {
  const ParseOptions options;
  auto parsed = ParseGenerationRequest(body, endpoint, options);
  if (const auto* error = std::get_if<ApiError>(&parsed)) {
    // A refusal is a client error with a message, and serializes.
    if (error->http_status < 400 || error->http_status >= 500 || error->message.empty()) abort();
    (void)error->ToJson().dump();
    return;
  }
  const GenerationRequest& r = std::get<GenerationRequest>(parsed);
  if (r.endpoint != endpoint) abort();
  if (r.max_tokens && (*r.max_tokens < 0 || *r.max_tokens > options.max_tokens_limit)) abort();
  if (static_cast<int>(r.stop.size()) > options.max_stop_strings) abort();
  if (endpoint == Endpoint::kChatCompletions && r.messages.empty()) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  Check(body, Endpoint::kCompletions);
  Check(body, Endpoint::kChatCompletions);
  return 0;
}
