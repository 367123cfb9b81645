// Tests for gateway/response_stream.h: token batches into text with stop strings and held-back
// characters, token ids streamed once, the stream's tail and the whole body.
#include "gateway/response_stream.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/gateway/gateway_test_support.h"

namespace pdserve::gateway {
namespace {

using testing::Ids;
using testing::TestTokenizer;

proto::TokenBatch Batch(const std::vector<int32_t>& ids, const std::string& finish = "") {
  proto::TokenBatch b;
  for (int32_t id : ids) b.add_tokens(id);
  b.set_finish_reason(finish);
  return b;
}

GenerationRequest Request() {
  GenerationRequest r;
  r.model = "m";
  r.stream = true;
  r.include_usage = true;
  return r;
}

TEST(ResponseStreamTest, CharactersSplitAcrossBatchesComeOutWhole) {
  ResponseStream s(Request(), TestTokenizer(), "r", "m", 1, Ids("p"));
  const std::vector<int32_t> ids = Ids(" caf\xc3\xa9 \xe2\x82\xac");
  std::string text;
  for (int32_t id : ids) text += s.AddTokens(Batch({id}));
  text += s.AddTokens(Batch({}, "stop"));
  EXPECT_EQ(text, " caf\xc3\xa9 \xe2\x82\xac");
  EXPECT_EQ(s.text(), text);
  EXPECT_EQ(s.completion_tokens(), static_cast<int>(ids.size()));
  EXPECT_EQ(s.token_ids(), ids);
}

TEST(ResponseStreamTest, AStopStringEndsTheTextBeforeIt) {
  GenerationRequest r = Request();
  r.stop = {"STOP"};
  ResponseStream s(r, TestTokenizer(), "r", "m", 1, Ids("p"));
  EXPECT_EQ(s.AddTokens(Batch(Ids(" one STOP two"))), " one ");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.text(), " one ");
}

TEST(ResponseStreamTest, TokenIdsAreStreamedOnceAndThePromptsFirst) {
  GenerationRequest r = Request();
  r.return_token_ids = true;
  ResponseStream s(r, TestTokenizer(), "r", "m", 1, {7, 8});
  s.AddTokens(Batch({10, 11}));
  const std::string first = s.DeltaEvent("x");
  s.AddTokens(Batch({12}));
  const std::string second = s.DeltaEvent("y");
  EXPECT_NE(first.find("\"prompt_token_ids\":[7,8]"), std::string::npos) << first;
  EXPECT_NE(first.find("\"token_ids\":[10,11]"), std::string::npos) << first;
  EXPECT_EQ(second.find("prompt_token_ids"), std::string::npos) << second;
  EXPECT_NE(second.find("\"token_ids\":[12]"), std::string::npos) << second;
}

TEST(ResponseStreamTest, TheTailCarriesUsageTimingCostAndDone) {
  ResponseStream s(Request(), TestTokenizer(), "r", "m", 1, Ids("p"));
  const std::string tail = s.StreamTail("stop", Usage{3, 4}, 0.25, "total;dur=1");
  EXPECT_NE(tail.find("\"finish_reason\":\"stop\""), std::string::npos);
  EXPECT_NE(tail.find("\"cost_usd\":0.25"), std::string::npos);
  EXPECT_NE(tail.find(": server-timing: total;dur=1"), std::string::npos);
  EXPECT_NE(tail.find(": x-pdserve-cost-usd: 0.25"), std::string::npos);
  EXPECT_EQ(tail.substr(tail.size() - 14), "data: [DONE]\n\n");
  EXPECT_NE(tail.find("\"prompt_tokens_details\":{\"cached_tokens\":0}"), std::string::npos)
      << tail;
  const std::string cached = s.StreamTail("stop", Usage{3, 4, 2}, 0.25, "t");
  EXPECT_NE(cached.find("\"prompt_tokens_details\":{\"cached_tokens\":2}"), std::string::npos)
      << cached;
  const std::string unpriced = s.StreamTail("stop", Usage{3, 4}, std::nullopt, "t");
  EXPECT_EQ(unpriced.find("cost"), std::string::npos);
}

TEST(ResponseStreamTest, TheWholeBodyHasTheTextAndUsage) {
  GenerationRequest r = Request();
  r.stream = false;
  ResponseStream s(r, TestTokenizer(), "r", "m", 1, Ids("p"));
  s.AddText("hello");
  s.set_completion_tokens(2);
  const auto body = nlohmann::json::parse(s.FullBody("length", Usage{4, 2, 3}, 0.5));
  EXPECT_EQ(body["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  EXPECT_EQ(body["choices"][0]["text"], "hello");
  EXPECT_EQ(body["usage"]["completion_tokens"], 2);
  EXPECT_EQ(body["usage"]["cost_usd"], 0.5);
}

}  // namespace
}  // namespace pdserve::gateway
