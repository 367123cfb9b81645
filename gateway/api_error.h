// ApiError: an error as an OpenAI-compatible server returns it: an HTTP status and the body
// {"error": {"message", "type", "param", "code"}}. The official SDKs map the status to their
// error classes (400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 429
// RateLimitError, 5xx InternalServerError) and show `message`. Value type; any thread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pdserve::gateway {

struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param;  // the request field at fault, empty when none
  std::string code;   // a stable machine-readable code, empty when none

  nlohmann::json ToJson() const;

  static ApiError BadRequest(std::string message, std::string param = "");
  static ApiError Unauthorized(std::string message);
  static ApiError ModelNotFound(const std::string& model);
  static ApiError NotFound(std::string message);
  static ApiError TooLarge(std::string message, std::string param = "");
  // 431: the request's header fields together are too long.
  static ApiError HeadersTooLarge(std::string message);
  static ApiError UnsupportedMediaType(std::string message);  // 415
  static ApiError RateLimited(std::string message);
  static ApiError Unavailable(std::string message);
  static ApiError Internal(std::string message);
};

}  // namespace pdserve::gateway
