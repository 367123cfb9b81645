// SSE framing split at every byte, with every line ending, and bounded.
#include "common/sse_parser.h"

#include <gtest/gtest.h>

namespace pdserve {
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

}  // namespace
}  // namespace pdserve
