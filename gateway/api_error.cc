#include "gateway/api_error.h"

namespace pdserve::gateway {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json error = {{"message", message}, {"type", type}};
  error["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  error["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", error}};
}

ApiError ApiError::BadRequest(std::string message, std::string param) {
  return {400, "invalid_request_error", std::move(message), std::move(param), ""};
}
ApiError ApiError::Unauthorized(std::string message) {
  return {401, "authentication_error", std::move(message), "", "invalid_api_key"};
}
ApiError ApiError::ModelNotFound(const std::string& model) {
  return {404, "invalid_request_error", "The model '" + model + "' does not exist", "model",
          "model_not_found"};
}
ApiError ApiError::NotFound(std::string message) {
  return {404, "invalid_request_error", std::move(message), "", "not_found"};
}
ApiError ApiError::TooLarge(std::string message, std::string param) {
  return {413, "invalid_request_error", std::move(message), std::move(param), "request_too_large"};
}
ApiError ApiError::HeadersTooLarge(std::string message) {
  return {431, "invalid_request_error", std::move(message), "", "request_headers_too_large"};
}
ApiError ApiError::UnsupportedMediaType(std::string message) {
  return {415, "invalid_request_error", std::move(message), "", "unsupported_media_type"};
}
ApiError ApiError::RateLimited(std::string message) {
  return {429, "rate_limit_error", std::move(message), "", "rate_limit_exceeded"};
}
ApiError ApiError::Unavailable(std::string message) {
  return {503, "server_error", std::move(message), "", "no_capacity"};
}
ApiError ApiError::Internal(std::string message) {
  return {500, "server_error", std::move(message), "", "internal_error"};
}

}  // namespace pdserve::gateway
