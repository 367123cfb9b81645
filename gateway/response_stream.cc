#include "gateway/response_stream.h"

#include <cstdio>

#include "common/json_text.h"
#include "common/utf8.h"

namespace pdserve::gateway {
namespace {

// Characters of UTF-8 text (completions' text_offset counts them, as vLLM's Python does).
size_t CodePoints(const std::string& text) {
  size_t n = 0;
  for (unsigned char c : text) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

}  // namespace

ResponseStream::ResponseStream(const GenerationRequest& request,
                               std::shared_ptr<const tokenizer::Tokenizer> tokenizer,
                               std::string request_id, std::string model_id, int64_t created,
                               std::vector<int32_t> prompt, int choice)
    : stream_(request.stream),
      include_usage_(request.include_usage),
      return_token_ids_(request.return_token_ids),
      endpoint_(request.endpoint),
      logprobs_(request.logprobs),
      choice_(choice),
      echo_(request.echo),
      tokenizer_(tokenizer),
      builder_(request.endpoint, std::move(request_id), std::move(model_id), created, choice),
      prompt_(std::move(prompt)),
      detok_(std::move(tokenizer)),
      stops_(request.stop),
      splitter_(request.tool_call_format),
      named_tool_choice_(request.tool_choice == ToolChoice::kNamed),
      parallel_tool_calls_(request.parallel_tool_calls) {
  if (echo_) {
    echo_text_ = request.prompt_token_ids
                     ? tokenizer_->Decode(*request.prompt_token_ids, /*skip_special=*/true)
                     : request.prompt;
  }
}

std::string ResponseStream::Echo(const proto::TokenBatch& batch) {
  echoed_ = true;
  if (logprobs_ >= 0 && !prompt_.empty()) {
    // The prompt's first token has no context, so no logprob; the rest come with the batch.
    token_logprobs_.push_back({prompt_[0], 0, {}, false});
    for (size_t k = 1; k < prompt_.size(); ++k) {
      TokenLogprob entry{prompt_[k], 0, {}, false};
      const int i = static_cast<int>(k) - 1;
      if (i < batch.prompt_logprobs_size()) {
        entry.logprob = batch.prompt_logprobs(i);
        entry.has_value = true;
        if (i < batch.prompt_top_logprobs_size()) {
          const proto::TopLogprobs& top = batch.prompt_top_logprobs(i);
          for (int t = 0; t < top.ids_size() && t < top.logprobs_size(); ++t) {
            entry.top.emplace_back(top.ids(t), top.logprobs(t));
          }
        }
      }
      token_logprobs_.push_back(std::move(entry));
    }
    prompt_entries_ = token_logprobs_.size();
  }
  completion_offset_ = CodePoints(echo_text_);
  return echo_text_;
}

std::string ResponseStream::AddTokens(const proto::TokenBatch& batch) {
  const std::string echo = echo_ && !echoed_ ? Echo(batch) : "";
  std::string piece;
  const int n = batch.tokens_size();
  for (int i = 0; i < n; ++i) {
    ++completion_tokens_;
    token_ids_.push_back(batch.tokens(i));
    if (i == n - 1 && batch.last_is_stop_token()) break;  // an end-of-sequence token has no text
    if (logprobs_ >= 0 && i < batch.logprobs_size()) {
      TokenLogprob entry{batch.tokens(i), batch.logprobs(i), {}};
      if (i < batch.top_logprobs_size()) {
        const proto::TopLogprobs& top = batch.top_logprobs(i);
        for (int k = 0; k < top.ids_size() && k < top.logprobs_size(); ++k) {
          entry.top.emplace_back(top.ids(k), top.logprobs(k));
        }
      }
      token_logprobs_.push_back(std::move(entry));
    }
    piece += stops_.Push(detok_.Add(batch.tokens(i)));
    if (stops_.stopped()) break;
  }
  const bool ended = stops_.stopped() || !batch.finish_reason().empty();
  if (!stops_.stopped() && !batch.finish_reason().empty()) {
    piece += stops_.Push(detok_.Flush());
    piece += stops_.Flush();
  }
  piece = splitter_.Push(piece);
  if (ended) piece += FinishToolCalls();
  text_ += piece;
  return echo + piece;
}

std::string ResponseStream::FinishToolCalls() {
  ParsedOutput parsed = splitter_.Finish();
  tool_calls_ = std::move(parsed.calls);
  if (!parallel_tool_calls_ && tool_calls_.size() > 1) tool_calls_.resize(1);
  return parsed.content;
}

nlohmann::json ResponseStream::ToolCallsJson(bool with_index) const {
  nlohmann::json calls = nlohmann::json::array();
  for (size_t i = 0; i < tool_calls_.size(); ++i) {
    // Unique within the response: a later choice's ids name it.
    const std::string choice = choice_ > 0 ? std::to_string(choice_) + "_" : "";
    nlohmann::json call = {
        {"id", "call_" + builder_.id().substr(builder_.id().find('-') + 1) + "_" + choice +
                   std::to_string(i)},
        {"type", "function"},
        {"function", {{"name", tool_calls_[i].name}, {"arguments", tool_calls_[i].arguments}}}};
    if (with_index) call["index"] = i;
    calls.push_back(std::move(call));
  }
  return calls;
}

std::string ResponseStream::FinalFinishReason(const std::string& finish_reason) const {
  // OpenAI: "tool_calls" where the model chose to call; a named function's call ends "stop".
  if (!tool_calls_.empty() && finish_reason == "stop" && !named_tool_choice_) return "tool_calls";
  return finish_reason;
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

std::string ResponseStream::TokenText(int32_t id) const {
  std::string text;
  AppendUtf8Lossy(tokenizer_->TokenBytes(id), text);
  return text;
}

nlohmann::json ResponseStream::TokenEntry(int32_t id, float logprob) const {
  nlohmann::json byte_values = nlohmann::json::array();
  for (unsigned char c : tokenizer_->TokenBytes(id)) byte_values.push_back(c);
  return {{"token", TokenText(id)}, {"logprob", logprob}, {"bytes", byte_values}};
}

size_t ResponseStream::SetLogprobs(nlohmann::json& body, size_t from, size_t to,
                                   size_t offset) const {
  nlohmann::json& choice = body["choices"][0];
  if (endpoint_ == Endpoint::kChatCompletions) {
    nlohmann::json content = nlohmann::json::array();
    for (size_t i = from; i < to; ++i) {
      const TokenLogprob& t = token_logprobs_[i];
      nlohmann::json entry = TokenEntry(t.id, t.logprob);
      entry["top_logprobs"] = nlohmann::json::array();
      for (const auto& [id, logprob] : t.top)
        entry["top_logprobs"].push_back(TokenEntry(id, logprob));
      content.push_back(std::move(entry));
    }
    choice["logprobs"] = {{"content", std::move(content)}, {"refusal", nullptr}};
    return offset;
  }
  nlohmann::json tokens = nlohmann::json::array(), values = nlohmann::json::array(),
                 tops = nlohmann::json::array(), offsets = nlohmann::json::array();
  for (size_t i = from; i < to; ++i) {
    const TokenLogprob& t = token_logprobs_[i];
    const std::string text = TokenText(t.id);
    if (i == prompt_entries_ && echo_) offset = completion_offset_;  // the completion's first
    tokens.push_back(text);
    offsets.push_back(offset);
    offset += CodePoints(text);
    if (!t.has_value) {  // a prompt's first token
      values.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    values.push_back(t.logprob);
    // vLLM's: the sampled token beside the most likely ones.
    nlohmann::json top = nlohmann::json::object();
    for (const auto& [id, logprob] : t.top) top[TokenText(id)] = logprob;
    top[text] = t.logprob;
    tops.push_back(std::move(top));
  }
  choice["logprobs"] = {{"tokens", std::move(tokens)},
                        {"token_logprobs", std::move(values)},
                        {"top_logprobs", std::move(tops)},
                        {"text_offset", std::move(offsets)}};
  return offset;
}

nlohmann::json ResponseStream::WithNewLogprobs(nlohmann::json chunk) {
  if (logprobs_ < 0) return chunk;
  const size_t to = token_logprobs_.size();
  text_offset_ = SetLogprobs(chunk, streamed_logprobs_, to, text_offset_);
  streamed_logprobs_ = to;
  return chunk;
}

std::string ResponseStream::DeltaEvent(const std::string& piece) {
  return SseEvent(WithNewLogprobs(WithNewTokenIds(builder_.Delta(piece))));
}

std::string ResponseStream::CostText(double cost_usd) {
  char text[64];
  std::snprintf(text, sizeof text, "%.12g", cost_usd);
  return text;
}

std::string ResponseStream::StreamTail(const std::string& finish_reason, const Usage& usage,
                                       std::optional<double> cost_usd,
                                       const std::string& server_timing) {
  return ChoiceTail(finish_reason) + StreamEnd(usage, cost_usd, server_timing);
}

std::string ResponseStream::ChoiceTail(const std::string& finish_reason) {
  std::string tail;
  if (!tool_calls_.empty()) {
    nlohmann::json chunk = builder_.Delta("");
    nlohmann::json& delta = chunk["choices"][0]["delta"];
    delta["content"] = nullptr;
    delta["tool_calls"] = ToolCallsJson(/*with_index=*/true);
    tail += SseEvent(chunk);
  }
  return tail + SseEvent(WithNewLogprobs(
                    WithNewTokenIds(builder_.Finish(FinalFinishReason(finish_reason)))));
}

std::string ResponseStream::StreamEnd(const Usage& usage, std::optional<double> cost_usd,
                                      const std::string& server_timing) const {
  const nlohmann::json extra =
      cost_usd ? nlohmann::json{{"cost_usd", *cost_usd}} : nlohmann::json(nullptr);
  std::string tail;
  if (include_usage_) tail += SseEvent(builder_.UsageChunk(usage, extra));
  tail += SseComment("server-timing: " + server_timing);
  if (cost_usd) tail += SseComment("x-pdserve-cost-usd: " + CostText(*cost_usd));
  return tail + SseDone();
}

std::string ResponseStream::FullBody(const std::string& finish_reason, const Usage& usage,
                                     std::optional<double> cost_usd) const {
  return DumpJson(FullJson(finish_reason, usage, cost_usd));
}

nlohmann::json ResponseStream::FullJson(const std::string& finish_reason, const Usage& usage,
                                        std::optional<double> cost_usd) const {
  const nlohmann::json extra =
      cost_usd ? nlohmann::json{{"cost_usd", *cost_usd}} : nlohmann::json(nullptr);
  nlohmann::json body =
      builder_.Full(echo_text_ + text_, FinalFinishReason(finish_reason), usage, extra);
  if (!tool_calls_.empty() && body["choices"][0].contains("message")) {
    nlohmann::json& message = body["choices"][0]["message"];
    if (text_.empty()) message["content"] = nullptr;
    message["tool_calls"] = ToolCallsJson(/*with_index=*/false);
  }
  if (return_token_ids_) ResponseBuilder::AddTokenIds(body, token_ids_, &prompt_);
  if (logprobs_ >= 0) SetLogprobs(body, 0, token_logprobs_.size(), 0);
  return body;
}

std::string ResponseStream::StreamError(const ApiError& error) {
  return SseError(error) + SseDone();
}

}  // namespace pdserve::gateway
