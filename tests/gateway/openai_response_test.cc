#include "gateway/openai_response.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

TEST(OpenAiResponseTest, ChatResponseAndChunksHaveOpenAiShapes) {
  ResponseBuilder b(Endpoint::kChatCompletions, "abc", "tiny", 1700000000);
  EXPECT_EQ(b.id(), "chatcmpl-abc");
  auto full = b.Full("hello", "stop", {5, 2});
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(full["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(full["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(full["usage"]["total_tokens"], 7);
  EXPECT_EQ(full["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  auto first = b.Delta("he");
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  auto second = b.Delta("llo");
  EXPECT_FALSE(second["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(b.Finish("length")["choices"][0]["finish_reason"], "length");
  auto usage = b.UsageChunk({5, 2}, {{"cost_usd", 0.5}});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
  EXPECT_EQ(usage["usage"]["cost_usd"], 0.5);
}

TEST(OpenAiResponseTest, UsageCarriesCachedPromptTokensNeverAboveThePrompt) {
  EXPECT_EQ((Usage{10, 2, 6}.ToJson()["prompt_tokens_details"]["cached_tokens"]), 6);
  EXPECT_EQ((Usage{10, 2, 60}.ToJson()["prompt_tokens_details"]["cached_tokens"]), 10);
  EXPECT_EQ((Usage{10, 2, -1}.ToJson()["prompt_tokens_details"]["cached_tokens"]), 0);
  EXPECT_EQ((Usage{10, 2, 6}.ToJson()["total_tokens"]), 12);  // cached tokens are prompt tokens
}

TEST(OpenAiResponseTest, CompletionShapesAndSseFraming) {
  ResponseBuilder b(Endpoint::kCompletions, "x1", "tiny", 1);
  EXPECT_EQ(b.Full("t", "length", {1, 1})["object"], "text_completion");
  EXPECT_EQ(b.Delta("t")["choices"][0]["text"], "t");
  EXPECT_EQ(SseEvent({{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseDone(), "data: [DONE]\n\n");
  EXPECT_EQ(SseComment("timing"), ": timing\n\n");
  EXPECT_NE(SseError(ApiError::Unavailable("gone")).find("\"no_capacity\""), std::string::npos);
}

// vLLM's return_token_ids: the ids go on the choice, the prompt's only where given.
TEST(OpenAiResponseTest, TokenIdsGoOnTheChoice) {
  ResponseBuilder b(Endpoint::kCompletions, "x2", "tiny", 1);
  const std::vector<int32_t> prompt{1, 2}, completion{7, 8, 9};
  auto full = b.Full("t", "length", {2, 3});
  ResponseBuilder::AddTokenIds(full, completion, &prompt);
  EXPECT_EQ(full["choices"][0]["token_ids"], nlohmann::json({7, 8, 9}));
  EXPECT_EQ(full["choices"][0]["prompt_token_ids"], nlohmann::json({1, 2}));
  EXPECT_EQ(full["choices"][0]["text"], "t");
  auto chunk = b.Delta("t");
  ResponseBuilder::AddTokenIds(chunk, {8});
  EXPECT_EQ(chunk["choices"][0]["token_ids"], nlohmann::json({8}));
  EXPECT_FALSE(chunk["choices"][0].contains("prompt_token_ids"));
}

}  // namespace
}  // namespace pdserve::gateway
