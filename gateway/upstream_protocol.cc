#include "gateway/upstream_protocol.h"

#include <nlohmann/json.hpp>

#include "common/json_text.h"
#include "common/openai_stream_chunk.h"

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

ApiError UpstreamError(const std::string& upstream, int http_status, std::string_view body) {
  const std::string message = OpenAiErrorMessage(body, 256);
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
