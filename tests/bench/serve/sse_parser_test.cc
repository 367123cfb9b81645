// SSE framing split at every byte, and OpenAI chunk shapes, including hostile ones.
#include "bench/serve/sse_parser.h"

#include <gtest/gtest.h>

namespace pdserve::bench {
namespace {

std::vector<SseEvent> ParseInPieces(std::string_view stream, size_t piece) {
  SseParser parser;
  std::vector<SseEvent> events;
  auto on_event = [&](SseEvent& e) { events.push_back(e); };
  for (size_t i = 0; i < stream.size(); i += piece) {
    EXPECT_TRUE(parser.Feed(stream.substr(i, piece), on_event).ok());
  }
  parser.Finish(on_event);
  return events;
}

TEST(SseParser, EventsSurviveAnySplitAndLineEnding) {
  const std::string stream =
      ": ping\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: error\ndata: line one\ndata: line two\n\n"
      "data:[DONE]\r\r";
  for (size_t piece = 1; piece <= stream.size(); ++piece) {
    auto events = ParseInPieces(stream, piece);
    ASSERT_EQ(events.size(), 3u) << "piece " << piece;
    EXPECT_EQ(events[0].data, "{\"a\":1}");
    EXPECT_EQ(events[1].event, "error");
    EXPECT_EQ(events[1].data, "line one\nline two");
    EXPECT_EQ(events[2].data, "[DONE]");
  }
}

TEST(SseParser, FinishDeliversAnUnterminatedLastEvent) {
  auto events = ParseInPieces("data: [DONE]\n", 100);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "[DONE]");
  EXPECT_TRUE(ParseInPieces("", 1).empty());
}

TEST(SseParser, BoundsTheSizeOfOneEvent) {
  SseParser parser(64);
  std::string endless(100, 'x');
  EXPECT_FALSE(parser.Feed(endless, [](SseEvent&) {}).ok());
}

TEST(StreamChunk, ReadsCompletionChatUsageDoneAndErrors) {
  auto c = ParseStreamChunk(R"({"choices":[{"index":0,"text":" hi","finish_reason":null}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->has_choice);
  EXPECT_EQ(c->text, " hi");
  c = ParseStreamChunk(R"({"choices":[{"delta":{"role":"assistant","content":null}}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->has_choice);  // a choice chunk with no text still counts, as in vLLM
  EXPECT_EQ(c->text, "");
  c = ParseStreamChunk(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":9}})");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_choice);
  EXPECT_EQ(*c->prompt_tokens, 7);
  EXPECT_EQ(*c->completion_tokens, 9);
  c = ParseStreamChunk("[DONE]");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->done);
  c = ParseStreamChunk(R"({"error":{"message":"out of pages","type":"server_error"}})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->error, "out of pages");
}

TEST(StreamChunk, HostileShapesAreErrorsOrIgnoredNeverCrashes) {
  EXPECT_FALSE(ParseStreamChunk("{not json").ok());
  EXPECT_FALSE(ParseStreamChunk("[1,2]").ok());
  EXPECT_FALSE(ParseStreamChunk("").ok());
  for (const char* odd :
       {R"({"choices":5})", R"({"choices":[7]})", R"({"choices":[{"text":3}]})",
        R"({"choices":[{"delta":"x"}]})", R"({"usage":{"completion_tokens":"9"}})",
        R"({"usage":[]})", R"({"error":null})"}) {
    auto c = ParseStreamChunk(odd);
    ASSERT_TRUE(c.ok()) << odd;
    EXPECT_FALSE(c->completion_tokens.has_value());
    EXPECT_FALSE(c->error.has_value());
  }
  auto negative = ParseStreamChunk(R"({"usage":{"prompt_tokens":-5,"completion_tokens":-1}})");
  ASSERT_TRUE(negative.ok());
  EXPECT_FALSE(negative->prompt_tokens.has_value());  // no count, not a negative one
  EXPECT_FALSE(negative->completion_tokens.has_value());
  // An error object nested 100,000 deep: writing it into a message once overflowed the stack.
  const std::string deep =
      R"({"error":)" + std::string(100000, '[') + "1" + std::string(100000, ']') + "}";
  auto d = ParseStreamChunk(deep);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("more than 64 deep"), std::string::npos);
  EXPECT_EQ(ErrorMessageFromBody(deep, 12), R"({"error":[[[)");  // the raw text, cut
}

TEST(StreamChunk, ErrorMessageFromBody) {
  EXPECT_EQ(ErrorMessageFromBody(R"({"error":{"message":"bad model"}})"), "bad model");
  EXPECT_EQ(ErrorMessageFromBody(R"({"message":"upstream"})"), "upstream");
  EXPECT_EQ(ErrorMessageFromBody("Bad Gateway\n"), "Bad Gateway");
  EXPECT_EQ(ErrorMessageFromBody(std::string(1000, 'x'), 10), std::string(10, 'x'));
}

}  // namespace
}  // namespace pdserve::bench
