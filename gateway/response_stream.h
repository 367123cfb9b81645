// ResponseStream: the response side of one completion request, apart from how it is served.
// Turns what its attempts produce into what the client reads: worker token ids into text
// (incremental detokenising, so no chunk carries half a character; stop strings, which end the
// text before them), an API's text as it came, and both into OpenAI bodies and stream chunks
// framed as SSE (gateway/openai_response.h), with vLLM's token ids when the request asked for
// them, and each token's log-probabilities when it asked for logprobs (chat's `content` entries
// with bytes and top_logprobs; completions' tokens, token_logprobs, top_logprobs, text_offset),
// a chunk carrying those of the tokens not yet streamed. Where the request has tools, the text
// from where a call may begin is held back (gateway/tool_calls.h) and, at the end, parsed into
// message.tool_calls (streamed as one tool-call delta), with finish_reason "tool_calls". It counts
// the completion's tokens and keeps their ids, which a resumed attempt prefills again. One per
// choice of a request (OpenAI's n: its bodies and chunks carry the choice's index). With echo
// (completions), the text starts with the prompt's (the first chunk of a stream carries it) and
// the logprobs with the prompt tokens' from the first batch (the first token's null; text_offset
// counts the prompt's tokens' texts, then the completion's from the echoed text's end). Owned by
// its call's strand (not locked).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/openai_request.h"
#include "gateway/openai_response.h"
#include "gateway/tool_calls.h"
#include "proto/control.pb.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::gateway {

class ResponseStream {
 public:
  // `prompt`: the request's prompt ids (vLLM's prompt_token_ids); `created`: Unix seconds.
  ResponseStream(const GenerationRequest& request,
                 std::shared_ptr<const tokenizer::Tokenizer> tokenizer, std::string request_id,
                 std::string model_id, int64_t created, std::vector<int32_t> prompt,
                 int choice = 0);

  const std::string& id() const { return builder_.id(); }
  const std::string& model_id() const { return builder_.model(); }
  int64_t created() const { return builder_.created(); }
  // Adds a worker's batch: counts its tokens and returns the text they complete (a batch with a
  // finish reason flushes what is held back). Once a stop string is seen, stopped() is true and
  // the text ends before it.
  std::string AddTokens(const proto::TokenBatch& batch);
  bool stopped() const { return stops_.stopped(); }
  // Adds an API's text as it came.
  void AddText(const std::string& text) { text_ += text; }
  // An API's streamed `choices` as the SSE event of a chunk of this response (relayed).
  std::string RelayedEvent(nlohmann::json choices) const {
    return SseEvent(builder_.ChunkWith(std::move(choices)));
  }
  // An API's usage replaces the count (its tokens are not ours to count).
  void set_completion_tokens(int tokens) { completion_tokens_ = tokens; }

  int completion_tokens() const { return completion_tokens_; }
  const std::vector<int32_t>& token_ids() const { return token_ids_; }
  const std::vector<int32_t>& prompt() const { return prompt_; }
  const std::string& text() const { return text_; }

  // The SSE event carrying `piece` (with the token ids not yet streamed, when asked for).
  std::string DeltaEvent(const std::string& piece);
  // The calls the output made (known once it ended).
  const std::vector<ToolCall>& tool_calls() const { return tool_calls_; }
  // The finish reason the client reads: "tool_calls" where the output called a tool of its own
  // choice and `finish_reason` is "stop"; else `finish_reason`.
  std::string FinalFinishReason(const std::string& finish_reason) const;
  // A stream's last bytes: the tool calls' delta, the finishing chunk, the usage chunk
  // (include_usage), the timing and cost comments, [DONE]. `cost_usd` unset: the cost was not known
  // in time.
  std::string StreamTail(const std::string& finish_reason, const Usage& usage,
                         std::optional<double> cost_usd, const std::string& server_timing);
  // StreamTail's parts: the choice's end (the tool calls' delta, the finishing chunk), and the
  // stream's (the usage chunk, the comments, [DONE]).
  std::string ChoiceTail(const std::string& finish_reason);
  std::string StreamEnd(const Usage& usage, std::optional<double> cost_usd,
                        const std::string& server_timing) const;
  // The non-streaming body, and as JSON (a request of several choices appends the others'
  // `choices[0]` to the first's).
  std::string FullBody(const std::string& finish_reason, const Usage& usage,
                       std::optional<double> cost_usd) const;
  nlohmann::json FullJson(const std::string& finish_reason, const Usage& usage,
                          std::optional<double> cost_usd) const;
  // An error after the stream began: the error event and [DONE].
  static std::string StreamError(const ApiError& error);
  // The cost as the x-pdserve-cost-usd header and comment carry it.
  static std::string CostText(double cost_usd);

 private:
  nlohmann::json WithNewTokenIds(nlohmann::json chunk);
  // With logprobs: the choice's `logprobs` for the tokens [from, to) of logprobs_, the first at
  // completions' text_offset `offset`; returns the offset after the last.
  size_t SetLogprobs(nlohmann::json& body, size_t from, size_t to, size_t offset) const;
  nlohmann::json WithNewLogprobs(nlohmann::json chunk);
  // A token's text as logprobs show it (lossy where it is part of a character), and chat's
  // entry of it with its bytes.
  std::string TokenText(int32_t id) const;
  nlohmann::json TokenEntry(int32_t id, float logprob) const;
  // The text the tool-call splitter held, parsed at the output's end: the content left.
  std::string FinishToolCalls();
  nlohmann::json ToolCallsJson(bool with_index) const;

  struct TokenLogprob {
    int32_t id = 0;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;
    bool has_value = true;  // false: a prompt's first token (null)
  };
  // With echo, on the first batch: the prompt's text and its tokens' logprobs.
  std::string Echo(const proto::TokenBatch& batch);

  const bool stream_, include_usage_, return_token_ids_;
  const Endpoint endpoint_;
  const int logprobs_;  // the request's top count; -1: none
  const int choice_;
  const bool echo_;
  bool echoed_ = false;
  std::string echo_text_;  // the prompt's text, with echo
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  ResponseBuilder builder_;
  std::vector<int32_t> prompt_;
  tokenizer::IncrementalDetokenizer detok_;
  tokenizer::StopStringMatcher stops_;
  std::string text_;
  int completion_tokens_ = 0;
  std::vector<int32_t> token_ids_;  // every completion token's id
  size_t streamed_ids_ = 0;         // with return_token_ids: how many stream chunks carried
  bool streamed_prompt_ids_ = false;
  std::vector<TokenLogprob> token_logprobs_;  // each token with text, where asked
  size_t streamed_logprobs_ = 0;
  size_t text_offset_ = 0;  // completions' text_offset of the next token streamed
  // With echo: the token_logprobs_ entries of the prompt, and where the completion's offsets start.
  size_t prompt_entries_ = 0;
  size_t completion_offset_ = 0;
  ToolCallSplitter splitter_;
  const bool named_tool_choice_;
  const bool parallel_tool_calls_;
  std::vector<ToolCall> tool_calls_;
};

}  // namespace pdserve::gateway
