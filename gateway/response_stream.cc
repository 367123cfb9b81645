#include "gateway/response_stream.h"

#include <cstdio>

#include "common/json_text.h"

namespace pdserve::gateway {

ResponseStream::ResponseStream(const GenerationRequest& request,
                               std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                               std::string request_id, std::string model_id, int64_t created,
                               std::vector<int32_t> prompt)
    : stream_(request.stream),
      include_usage_(request.include_usage),
      return_token_ids_(request.return_token_ids),
      builder_(request.endpoint, std::move(request_id), std::move(model_id), created),
      prompt_(std::move(prompt)),
      detok_(std::move(tokenizer)),
      stops_(request.stop) {}

std::string ResponseStream::AddTokens(const proto::TokenBatch& batch) {
  std::string piece;
  const int n = batch.tokens_size();
  for (int i = 0; i < n; ++i) {
    ++completion_tokens_;
    token_ids_.push_back(batch.tokens(i));
    if (i == n - 1 && batch.last_is_stop_token()) break;  // an end-of-sequence token has no text
    piece += stops_.Push(detok_.Add(batch.tokens(i)));
    if (stops_.stopped()) break;
  }
  if (!stops_.stopped() && !batch.finish_reason().empty()) {
    piece += stops_.Push(detok_.Flush());
    piece += stops_.Flush();
  }
  text_ += piece;
  return piece;
}

nlohmann::json ResponseStream::WithNewTokenIds(nlohmann::json chunk) {
  if (!return_token_ids_) return chunk;
  const std::vector<int32_t> fresh(token_ids_.begin() + static_cast<std::ptrdiff_t>(streamed_ids_),
                                   token_ids_.end());
  streamed_ids_ = token_ids_.size();
  ResponseBuilder::AddTokenIds(chunk, fresh, streamed_prompt_ids_ ? nullptr : &prompt_);
  streamed_prompt_ids_ = true;
  return chunk;
}

std::string ResponseStream::DeltaEvent(const std::string& piece) {
  return SseEvent(WithNewTokenIds(builder_.Delta(piece)));
}

std::string ResponseStream::CostText(double cost_usd) {
  char text[64];
  std::snprintf(text, sizeof text, "%.12g", cost_usd);
  return text;
}

std::string ResponseStream::StreamTail(const std::string& finish_reason, const Usage& usage,
                                       std::optional<double> cost_usd,
                                       const std::string& server_timing) {
  const nlohmann::json extra =
      cost_usd ? nlohmann::json{{"cost_usd", *cost_usd}} : nlohmann::json(nullptr);
  std::string tail = SseEvent(WithNewTokenIds(builder_.Finish(finish_reason)));
  if (include_usage_) tail += SseEvent(builder_.UsageChunk(usage, extra));
  tail += SseComment("server-timing: " + server_timing);
  if (cost_usd) tail += SseComment("x-pdserve-cost-usd: " + CostText(*cost_usd));
  return tail + SseDone();
}

std::string ResponseStream::FullBody(const std::string& finish_reason, const Usage& usage,
                                     std::optional<double> cost_usd) const {
  const nlohmann::json extra =
      cost_usd ? nlohmann::json{{"cost_usd", *cost_usd}} : nlohmann::json(nullptr);
  nlohmann::json body = builder_.Full(text_, finish_reason, usage, extra);
  if (return_token_ids_) ResponseBuilder::AddTokenIds(body, token_ids_, &prompt_);
  return DumpJson(body);
}

std::string ResponseStream::StreamError(const ApiError& error) {
  return SseError(error) + SseDone();
}

}  // namespace pdserve::gateway
