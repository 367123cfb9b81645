// Building OpenAI response bodies and stream chunks for /v1/completions and
// /v1/chat/completions, in the exact shapes the official SDKs parse: the whole response, the
// per-token chunks, the usage chunk (stream_options.include_usage), and SSE framing ending in
// `data: [DONE]`. One ResponseBuilder per request; not shared across threads.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gateway/api_error.h"
#include "gateway/openai_request.h"

namespace pdserve::gateway {

// A response's usage. ToJson gives OpenAI's object, prompt_tokens_details.cached_tokens (the
// prompt tokens a prefix cache served) clamped to [0, prompt_tokens].
struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_prompt_tokens = 0;
  nlohmann::json ToJson() const;
};

class ResponseBuilder {
 public:
  // id: "cmpl-..." or "chatcmpl-..." is prefixed from request_id; created: Unix seconds; index:
  // the choice its bodies and chunks are of (OpenAI's n).
  ResponseBuilder(Endpoint endpoint, std::string request_id, std::string model, int64_t created,
                  int index = 0);

  const std::string& id() const { return id_; }
  const std::string& model() const { return model_; }
  int64_t created() const { return created_; }

  // The non-streaming body.
  nlohmann::json Full(const std::string& text, const std::string& finish_reason, const Usage& usage,
                      const nlohmann::json& extra_usage = nullptr) const;
  // A streaming chunk carrying `text` (chat: the first chunk also carries the role).
  nlohmann::json Delta(const std::string& text);
  // The chunk that closes the choice with its finish reason.
  nlohmann::json Finish(const std::string& finish_reason) const;
  // With return_token_ids: the choice of `body` (from Full, Delta or Finish) gets the completion's
  // `token_ids`, and `prompt_token_ids` when given (vLLM's fields, on the choice).
  static void AddTokenIds(nlohmann::json& body, const std::vector<int32_t>& token_ids,
                          const std::vector<int32_t>* prompt_token_ids = nullptr);
  // A streaming chunk carrying `choices` as given (an upstream's, relayed).
  nlohmann::json ChunkWith(nlohmann::json choices) const;
  // The usage chunk: empty choices, the usage object.
  nlohmann::json UsageChunk(const Usage& usage, const nlohmann::json& extra_usage = nullptr) const;

 private:
  nlohmann::json ChunkHead() const;

  Endpoint endpoint_;
  std::string id_;
  std::string model_;
  int64_t created_;
  int index_;
  bool sent_role_ = false;
};

// "data: <json>\n\n"
std::string SseEvent(const nlohmann::json& payload);
// "data: [DONE]\n\n"
std::string SseDone();
// An SSE comment line (ignored by clients): ": text\n\n".
std::string SseComment(const std::string& text);
// The error event sent when a stream fails after it started: the error object as data.
std::string SseError(const ApiError& error);

}  // namespace pdserve::gateway
