#include "gateway/upstream_protocol.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "common/sse_parser.h"

namespace pdserve::gateway {
namespace {

using Json = nlohmann::json;

TEST(UpstreamRequestBodyTest, NamesTheUpstreamModelAsksForUsageAndDropsVllmFields) {
  const std::string client = R"({"model":"tiny","prompt":"hi","max_tokens":5,"stream":true,
      "ignore_eos":true,"top_k":3,"return_token_ids":false,"temperature":0.5,"stop":["x"]})";
  auto body = UpstreamRequestBody(client, "gpt-4o-mini", /*stream=*/true);
  ASSERT_TRUE(body.ok());
  const Json j = Json::parse(*body);
  EXPECT_EQ(j["model"], "gpt-4o-mini");
  EXPECT_EQ(j["prompt"], "hi");
  EXPECT_EQ(j["max_tokens"], 5);
  EXPECT_EQ(j["temperature"], 0.5);
  EXPECT_EQ(j["stop"], Json::array({"x"}));
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_FALSE(j.contains("ignore_eos"));
  EXPECT_FALSE(j.contains("top_k"));
  EXPECT_FALSE(j.contains("return_token_ids"));

  auto whole = UpstreamRequestBody(R"({"model":"tiny","messages":[]})", "m", /*stream=*/false);
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(Json::parse(*whole).contains("stream_options"));
  EXPECT_FALSE(UpstreamRequestBody("[1]", "m", false).ok());
}

TEST(WhyNotExternalTest, TokenIdsStayWithThisModel) {
  GenerationRequest r;
  EXPECT_EQ(WhyNotExternal(r), "");
  r.return_token_ids = true;
  EXPECT_NE(WhyNotExternal(r), "");
  r.return_token_ids = false;
  r.prompt_token_ids = std::vector<int32_t>{1, 2};
  EXPECT_NE(WhyNotExternal(r), "");
}

TEST(UpstreamErrorTest, MapsStatusesAndKeepsTheUpstreamsMessage) {
  const ApiError e500 = UpstreamError("openai", 500, R"({"error":{"message":"boom"}})");
  EXPECT_EQ(e500.http_status, 502);
  EXPECT_EQ(e500.code, "external_upstream_failed");
  EXPECT_NE(e500.message.find("openai"), std::string::npos);
  EXPECT_NE(e500.message.find("boom"), std::string::npos);
  EXPECT_EQ(UpstreamError("u", 429, "slow down").http_status, 429);
  EXPECT_EQ(UpstreamError("u", 400, "{}").http_status, 400);
  EXPECT_TRUE(RetryableUpstreamStatus(500));
  EXPECT_TRUE(RetryableUpstreamStatus(429));
  EXPECT_FALSE(RetryableUpstreamStatus(400));
}

// The gateway reads an upstream's stream with common/sse_parser.h: each event's data.
TEST(UpstreamSseTest, SplitsEventsFedInAnyPieces) {
  const std::string stream =
      ": ping\r\n\r\ndata: {\"a\":1}\r\n\r\nevent: x\ndata: one\ndata: two\n\ndata: [DONE]\n\n";
  for (size_t piece : {size_t{1}, size_t{3}, stream.size()}) {
    SseParser reader;
    std::vector<std::string> got;
    for (size_t i = 0; i < stream.size(); i += piece) {
      ASSERT_TRUE(reader
                      .Feed(std::string_view(stream).substr(i, piece),
                            [&](SseEvent& e) { got.emplace_back(e.data); })
                      .ok());
    }
    EXPECT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "one\ntwo", "[DONE]"})) << piece;
  }
  SseParser small(8);
  EXPECT_FALSE(small.Feed("data: 0123456789\n\n", [](SseEvent&) {}).ok());
  EXPECT_FALSE(small.Feed("\n", [](SseEvent&) {}).ok());  // stays failed
}

}  // namespace
}  // namespace pdserve::gateway
