#include "gateway/upstream_protocol.h"

#include <nlohmann/json.hpp>

#include "common/json_text.h"

namespace pdserve::gateway {

using Json = nlohmann::json;

Result<std::string> UpstreamRequestBody(std::string_view client_body, const std::string& model,
                                        bool stream) {
  Json body = Json::parse(client_body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return InvalidArgument("the request body is not a JSON object");
  }
  if (!model.empty()) body["model"] = model;
  for (const char* field : {"ignore_eos", "top_k", "return_token_ids"}) body.erase(field);
  if (stream) {
    if (!body.contains("stream_options") || !body["stream_options"].is_object()) {
      body["stream_options"] = Json::object();
    }
    body["stream_options"]["include_usage"] = true;
  }
  return DumpJson(body);
}

std::string WhyNotExternal(const GenerationRequest& request) {
  if (request.prompt_token_ids) return "its prompt is token ids of this model";
  if (request.return_token_ids) return "it asks for this model's token ids";
  return "";
}

namespace {

std::optional<int64_t> Count(const Json& usage, const char* field) {
  auto it = usage.find(field);
  if (it == usage.end() || !it->is_number_integer() || it->get<int64_t>() < 0) return std::nullopt;
  return it->get<int64_t>();
}

// Deeper JSON than any OpenAI answer nests is refused before it is parsed.
constexpr int kMaxNesting = 32;

Result<UpstreamChunk> ReadChunk(std::string_view text, bool stream) {
  if (JsonNestingDepth(text) > kMaxNesting) {
    return InvalidArgument("the upstream sent JSON nested too deeply");
  }
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("the upstream sent something that is not a JSON object");
  }
  UpstreamChunk c;
  if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
    c.error = e->is_object() && e->contains("message") && (*e)["message"].is_string()
                  ? (*e)["message"].get<std::string>()
                  : DumpJson(*e);
    return c;
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    c.prompt_tokens = Count(*u, "prompt_tokens");
    c.completion_tokens = Count(*u, "completion_tokens");
  }
  auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty()) return c;
  const Json& choice = (*choices)[0];
  if (!choice.is_object())
    return InvalidArgument("the upstream sent a choice that is not an object");
  auto take = [&](const Json& holder, const char* field) {
    if (!holder.is_object()) return;
    auto it = holder.find(field);
    if (it != holder.end() && it->is_string()) c.text += it->get<std::string>();
  };
  take(choice, "text");
  if (auto d = choice.find(stream ? "delta" : "message"); d != choice.end()) take(*d, "content");
  if (auto f = choice.find("finish_reason"); f != choice.end() && f->is_string()) {
    c.finish_reason = f->get<std::string>();
  }
  return c;
}

}  // namespace

Result<UpstreamChunk> ParseUpstreamChunk(std::string_view data) { return ReadChunk(data, true); }

Result<UpstreamChunk> ParseUpstreamResponse(std::string_view body) {
  return ReadChunk(body, false);
}

ApiError UpstreamError(const std::string& upstream, int http_status, std::string_view body) {
  std::string message;
  const Json j = JsonNestingDepth(body) > kMaxNesting
                     ? Json(nullptr)
                     : Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string()) {
    message = j["error"]["message"].get<std::string>();
  } else {
    message = std::string(body.substr(0, 256));
  }
  const std::string text = "The external upstream '" + upstream + "' answered " +
                           std::to_string(http_status) + (message.empty() ? "" : ": " + message);
  ApiError e = ApiError::Internal(text);
  e.http_status = 502;
  e.type = "upstream_error";
  e.code = "external_upstream_failed";
  if (http_status == 429) {
    e = ApiError::RateLimited(text);
    e.code = "external_upstream_rate_limited";
  } else if (http_status == 400) {
    e = ApiError::BadRequest(text);
  }
  return e;
}

bool RetryableUpstreamStatus(int http_status) { return http_status != 400; }

}  // namespace pdserve::gateway
