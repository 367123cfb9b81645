#include "gateway/openai_response.h"
#include "common/json_text.h"

#include <algorithm>

namespace pdserve::gateway {

using nlohmann::json;

json Usage::ToJson() const {
  const int cached = std::clamp(cached_prompt_tokens, 0, std::max(prompt_tokens, 0));
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

ResponseBuilder::ResponseBuilder(Endpoint endpoint, std::string request_id, std::string model,
                                 int64_t created, int index)
    : endpoint_(endpoint),
      id_((endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") + request_id),
      model_(std::move(model)),
      created_(created),
      index_(index) {}

static json WithExtra(json usage, const json& extra) {
  if (extra.is_object()) usage.update(extra);
  return usage;
}

json ResponseBuilder::Full(const std::string& text, const std::string& finish_reason,
                           const Usage& usage, const json& extra_usage) const {
  json choice = {{"index", index_}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  if (endpoint_ == Endpoint::kChatCompletions) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  return {
      {"id", id_},
      {"object", endpoint_ == Endpoint::kChatCompletions ? "chat.completion" : "text_completion"},
      {"created", created_},
      {"model", model_},
      {"choices", json::array({choice})},
      {"usage", WithExtra(usage.ToJson(), extra_usage)}};
}

json ResponseBuilder::ChunkHead() const {
  return {{"id", id_},
          {"object",
           endpoint_ == Endpoint::kChatCompletions ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_}};
}

json ResponseBuilder::Delta(const std::string& text) {
  json chunk = ChunkHead();
  json choice = {{"index", index_}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  if (endpoint_ == Endpoint::kChatCompletions) {
    choice["delta"] = {{"content", text}};
    if (!sent_role_) choice["delta"]["role"] = "assistant";
    sent_role_ = true;
  } else {
    choice["text"] = text;
  }
  chunk["choices"] = json::array({choice});
  return chunk;
}

json ResponseBuilder::Finish(const std::string& finish_reason) const {
  json chunk = ChunkHead();
  json choice = {{"index", index_}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  if (endpoint_ == Endpoint::kChatCompletions) {
    choice["delta"] = json::object();
  } else {
    choice["text"] = "";
  }
  chunk["choices"] = json::array({choice});
  return chunk;
}

void ResponseBuilder::AddTokenIds(json& body, const std::vector<int32_t>& token_ids,
                                  const std::vector<int32_t>* prompt_token_ids) {
  json& choice = body["choices"][0];
  choice["token_ids"] = token_ids;
  if (prompt_token_ids) choice["prompt_token_ids"] = *prompt_token_ids;
}

json ResponseBuilder::ChunkWith(json choices) const {
  json chunk = ChunkHead();
  chunk["choices"] = std::move(choices);
  return chunk;
}

json ResponseBuilder::UsageChunk(const Usage& usage, const json& extra_usage) const {
  json chunk = ChunkHead();
  chunk["choices"] = json::array();
  chunk["usage"] = WithExtra(usage.ToJson(), extra_usage);
  return chunk;
}

std::string SseEvent(const json& payload) { return "data: " + DumpJson(payload) + "\n\n"; }
std::string SseDone() { return "data: [DONE]\n\n"; }
std::string SseComment(const std::string& text) { return ": " + text + "\n\n"; }
std::string SseError(const ApiError& error) { return SseEvent(error.ToJson()); }

}  // namespace pdserve::gateway
