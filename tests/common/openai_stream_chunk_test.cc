// OpenAI stream chunks and whole responses as the load generator and the gateway read them,
// including hostile shapes, and an error body's message.
#include "common/openai_stream_chunk.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace pdserve {
namespace {

// A relay keeps the choices as sent (tool calls, logprobs, several choices); a reader that does
// not ask pays nothing for them.
TEST(OpenAiStreamChunk, KeepsTheChoicesWhenAsked) {
  const char* data =
      R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}},)"
      R"({"index":1,"delta":{"content":"x"},"logprobs":{"content":[]}}]})";
  auto kept = ParseOpenAiStreamData(data, /*keep_choices=*/true);
  ASSERT_TRUE(kept.ok());
  const auto choices = nlohmann::json::parse(kept->choices);
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(choices[0]["delta"]["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_EQ(choices[1]["index"], 1);
  EXPECT_TRUE(ParseOpenAiStreamData(data)->choices.empty());
  auto whole = ParseOpenAiResponse(R"({"choices":[{"index":0,"message":{"content":"a"}}]})", true);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(nlohmann::json::parse(whole->choices)[0]["message"]["content"], "a");
  EXPECT_TRUE(ParseOpenAiStreamData(R"({"choices":[]})", true)->choices.empty());
}

TEST(OpenAiStreamChunk, ReadsCompletionChatUsageDoneAndErrors) {
  auto c = ParseOpenAiStreamData(R"({"choices":[{"index":0,"text":" hi","finish_reason":null}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->has_choice);
  EXPECT_EQ(c->text, " hi");
  EXPECT_EQ(c->finish_reason, "");
  c = ParseOpenAiStreamData(
      R"({"id":"x","choices":[{"index":0,"delta":{"content":" hello"},"finish_reason":"length"}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text, " hello");
  EXPECT_EQ(c->finish_reason, "length");
  c = ParseOpenAiStreamData(R"({"choices":[{"delta":{"role":"assistant","content":null}}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->has_choice);  // a choice chunk with no text still counts, as in vLLM
  EXPECT_EQ(c->text, "");
  c = ParseOpenAiStreamData(
      R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16}})");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_choice);
  EXPECT_EQ(*c->prompt_tokens, 7);
  EXPECT_EQ(*c->completion_tokens, 9);
  for (const char* done : {"[DONE]", "[DONE] \n"}) {
    c = ParseOpenAiStreamData(done);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->done);
  }
  c = ParseOpenAiStreamData(R"({"error":{"message":"out of pages","type":"server_error"}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->error, "out of pages");
  c = ParseOpenAiStreamData(R"({"error":"overloaded"})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->error, "overloaded");
}

TEST(OpenAiStreamChunk, KeepsReasoningApartFromTheAnswer) {
  auto c = ParseOpenAiStreamData(R"({"choices":[{"delta":{"reasoning_content":"think"}}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->has_choice);
  EXPECT_EQ(c->reasoning_text, "think");
  EXPECT_EQ(c->text, "");
  c = ParseOpenAiStreamData(R"({"choices":[{"delta":{"reasoning_content":"a","content":"b"}}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->reasoning_text, "a");
  EXPECT_EQ(c->text, "b");
}

TEST(OpenAiStreamChunk, HostileShapesAreErrorsOrIgnoredNeverCrashes) {
  EXPECT_FALSE(ParseOpenAiStreamData("{not json").ok());
  EXPECT_FALSE(ParseOpenAiStreamData("[1,2]").ok());
  EXPECT_FALSE(ParseOpenAiStreamData("").ok());
  for (const char* odd :
       {R"({"choices":5})", R"({"choices":[7]})", R"({"choices":[{"text":3}]})",
        R"({"choices":[{"delta":"x"}]})", R"({"choices":[{"finish_reason":1}]})",
        R"({"usage":{"completion_tokens":"9"}})", R"({"usage":[]})", R"({"error":null})"}) {
    auto c = ParseOpenAiStreamData(odd);
    ASSERT_TRUE(c.ok()) << odd;
    EXPECT_EQ(c->text, "") << odd;
    EXPECT_EQ(c->finish_reason, "") << odd;
    EXPECT_FALSE(c->completion_tokens.has_value());
    EXPECT_FALSE(c->error.has_value());
  }
  auto negative = ParseOpenAiStreamData(R"({"usage":{"prompt_tokens":-5,"completion_tokens":-1}})");
  ASSERT_TRUE(negative.ok());
  EXPECT_FALSE(negative->prompt_tokens.has_value());  // no count, not a negative one
  EXPECT_FALSE(negative->completion_tokens.has_value());
  // An error object nested 100,000 deep: writing it into a message would overflow the stack.
  const std::string deep =
      R"({"error":)" + std::string(100000, '[') + "1" + std::string(100000, ']') + "}";
  auto d = ParseOpenAiStreamData(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("more than 64 deep"), std::string::npos);
  EXPECT_FALSE(ParseOpenAiResponse(deep).ok());
  EXPECT_EQ(OpenAiErrorMessage(deep, 12), R"({"error":[[[)");  // the raw text, cut
}

TEST(OpenAiResponse, ReadsAWholeChatOrCompletionBody) {
  auto chat = ParseOpenAiResponse(
      R"({"choices":[{"message":{"role":"assistant","content":"hi there",
          "reasoning_content":"hm"},"finish_reason":"stop"}],
          "usage":{"prompt_tokens":4,"completion_tokens":2}})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->text, "hi there");
  EXPECT_EQ(chat->reasoning_text, "hm");
  EXPECT_EQ(chat->finish_reason, "stop");
  EXPECT_EQ(chat->completion_tokens, 2);
  auto text = ParseOpenAiResponse(R"({"choices":[{"text":" x y","finish_reason":"length"}]})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->text, " x y");
  EXPECT_FALSE(text->prompt_tokens);
  // A whole response's text is in .message, not .delta; [DONE] is not a response.
  auto delta = ParseOpenAiResponse(R"({"choices":[{"delta":{"content":"no"}}]})");
  ASSERT_TRUE(delta.ok());
  EXPECT_EQ(delta->text, "");
  EXPECT_FALSE(ParseOpenAiResponse("[DONE]").ok());
}

TEST(OpenAiErrorMessage, ReadsTheMessageElseTheBody) {
  EXPECT_EQ(OpenAiErrorMessage(R"({"error":{"message":"bad model"}})"), "bad model");
  EXPECT_EQ(OpenAiErrorMessage(R"({"error":"busy"})"), "busy");
  EXPECT_EQ(OpenAiErrorMessage(R"({"message":"upstream"})"), "upstream");
  EXPECT_EQ(OpenAiErrorMessage("Bad Gateway\n"), "Bad Gateway");
  EXPECT_EQ(OpenAiErrorMessage(std::string(1000, 'x'), 10), std::string(10, 'x'));
  EXPECT_EQ(OpenAiErrorMessage(R"({"error":{"message":"0123456789"}})", 4), "0123");
}

}  // namespace
}  // namespace pdserve
