// Tests for gateway/response_stream.h: token batches into text with stop strings and held-back
// characters, token ids streamed once, the stream's tail and the whole body, a later choice's
// index, and echo with the prompt's logprobs.
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

// A batch whose every token has `logprob` and the same top two (ids 1 and 2).
proto::TokenBatch WithLogprobs(const std::vector<int32_t>& ids, float logprob) {
  proto::TokenBatch b = Batch(ids);
  for (size_t i = 0; i < ids.size(); ++i) {
    b.add_logprobs(logprob);
    proto::TopLogprobs* top = b.add_top_logprobs();
    top->add_ids(ids[i]);
    top->add_logprobs(logprob);
    top->add_ids(2);
    top->add_logprobs(-5.0f);
  }
  return b;
}

TEST(ResponseStreamTest, ChatLogprobsAreStreamedOnceWithBytesAndTopEntries) {
  GenerationRequest r = Request();
  r.endpoint = Endpoint::kChatCompletions;
  r.logprobs = 2;
  ResponseStream s(r, TestTokenizer(), "r", "m", 1, Ids("p"));
  const std::vector<int32_t> ids = Ids(" hi");
  s.AddTokens(WithLogprobs(ids, -0.5f));
  auto first = nlohmann::json::parse(s.DeltaEvent(" hi").substr(6));
  const auto& content = first["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), ids.size()) << first;
  std::string text;
  for (const auto& entry : content) {
    EXPECT_EQ(entry["logprob"], -0.5);
    ASSERT_EQ(entry["top_logprobs"].size(), 2u);
    EXPECT_EQ(entry["top_logprobs"][1]["logprob"], -5.0);
    for (int b : entry["bytes"]) text += static_cast<char>(b);
  }
  EXPECT_EQ(text, " hi");
  // The next chunk carries only the new token's.
  s.AddTokens(WithLogprobs(Ids("!"), -1.0f));
  auto second = nlohmann::json::parse(s.DeltaEvent("!").substr(6));
  ASSERT_EQ(second["choices"][0]["logprobs"]["content"].size(), Ids("!").size());
  // Without logprobs asked, logprobs is null.
  ResponseStream plain(Request(), TestTokenizer(), "r", "m", 1, Ids("p"));
  plain.AddTokens(WithLogprobs(ids, -0.5f));
  auto none = nlohmann::json::parse(plain.DeltaEvent(" hi").substr(6));
  EXPECT_TRUE(none["choices"][0]["logprobs"].is_null());
}

TEST(ResponseStreamTest, CompletionLogprobsHaveTokensOffsetsAndTopDictionaries) {
  GenerationRequest r = Request();
  r.stream = false;
  r.logprobs = 1;
  ResponseStream s(r, TestTokenizer(), "r", "m", 1, Ids("p"));
  const std::vector<int32_t> ids = Ids(" ab cd");
  s.AddTokens(WithLogprobs(ids, -0.25f));
  s.AddTokens(Batch({}, "length"));
  const auto body = nlohmann::json::parse(s.FullBody("length", Usage{1, 2}, 0.5));
  const auto& lp = body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), ids.size()) << body;
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(lp["text_offset"][i], joined.size());
    joined += lp["tokens"][i].get<std::string>();
    EXPECT_EQ(lp["token_logprobs"][i], -0.25);
    EXPECT_TRUE(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>()));
  }
  EXPECT_EQ(joined, " ab cd");
}

TEST(ResponseStreamTest, EchoPutsThePromptAndItsLogprobsFirst) {
  GenerationRequest r = Request();
  r.stream = false;
  r.echo = true;
  r.logprobs = 1;
  r.prompt = "hi there";
  const std::vector<int32_t> prompt = Ids("hi there");
  ResponseStream s(r, TestTokenizer(), "r", "m", 1, prompt);
  proto::TokenBatch first = WithLogprobs(Ids(" ok"), -0.5f);
  for (size_t k = 1; k < prompt.size(); ++k) {
    first.add_prompt_logprobs(-1.0f * static_cast<float>(k));
    proto::TopLogprobs* top = first.add_prompt_top_logprobs();
    top->add_ids(prompt[k]);
    top->add_logprobs(-0.1f);
  }
  EXPECT_EQ(s.AddTokens(first), "hi there ok");
  s.AddTokens(Batch({}, "length"));
  EXPECT_EQ(s.text(), " ok") << "the echo is not the completion's text";
  const auto body = nlohmann::json::parse(s.FullBody("length", Usage{1, 2}, 0.5));
  EXPECT_EQ(body["choices"][0]["text"], "hi there ok");
  const auto& lp = body["choices"][0]["logprobs"];
  const size_t p = prompt.size();
  ASSERT_EQ(lp["tokens"].size(), p + Ids(" ok").size()) << body;
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_EQ(lp["token_logprobs"][1], -1.0);
  EXPECT_EQ(lp["token_logprobs"][p - 1], -1.0 * static_cast<double>(p - 1));
  EXPECT_EQ(lp["token_logprobs"][p], -0.5);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["text_offset"][p], 8) << "the completion starts after the echoed text";

  // Streamed: the first chunk carries the prompt's text.
  r.stream = true;
  r.logprobs = -1;
  ResponseStream streamed(r, TestTokenizer(), "r", "m", 1, prompt);
  EXPECT_EQ(streamed.AddTokens(Batch(Ids(" ok"))), "hi there ok");
  EXPECT_EQ(streamed.AddTokens(Batch(Ids("!"))), "!");
}

TEST(ResponseStreamTest, ALaterChoiceCarriesItsIndex) {
  ResponseStream s(Request(), TestTokenizer(), "r", "m", 1, Ids("p"), 2);
  const std::string piece = s.AddTokens(Batch(Ids("ab")));
  const std::string event = s.DeltaEvent(piece);
  const auto chunk = nlohmann::json::parse(event.substr(6));
  EXPECT_EQ(chunk["choices"][0]["index"], 2) << event;
  const std::string tail = s.ChoiceTail("length");
  EXPECT_NE(tail.find(R"("index":2)"), std::string::npos) << tail;
  EXPECT_EQ(tail.find("[DONE]"), std::string::npos) << "a choice's end is not the stream's";
  EXPECT_NE(s.StreamEnd(Usage{1, 2}, 0.5, "x").find("[DONE]"), std::string::npos);
  const auto body = s.FullJson("length", Usage{1, 2}, std::nullopt);
  EXPECT_EQ(body["choices"][0]["index"], 2);
}

TEST(ResponseStreamTest, ToolCallsBecomeMessageToolCallsAndOneDelta) {
  GenerationRequest r = Request();
  r.endpoint = Endpoint::kChatCompletions;
  r.tool_choice = ToolChoice::kAuto;
  r.tool_call_format = ToolCallFormat::kHermes;
  const std::string output =
      " Checking.<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": 1}}\n</tool_call>";
  ResponseStream streamed(r, TestTokenizer(), "r", "m", 1, Ids("p"));
  std::string content;
  for (int32_t id : Ids(output)) content += streamed.AddTokens(Batch({id}));
  content += streamed.AddTokens(Batch({}, "stop"));
  EXPECT_EQ(content, " Checking.");
  ASSERT_EQ(streamed.tool_calls().size(), 1u);
  const std::string tail = streamed.StreamTail("stop", Usage{1, 2}, 0.5, "t");
  EXPECT_NE(tail.find("\"tool_calls\":[{"), std::string::npos) << tail;
  EXPECT_NE(tail.find("\"arguments\":\"{\\\"x\\\":1}\""), std::string::npos) << tail;
  EXPECT_NE(tail.find("\"finish_reason\":\"tool_calls\""), std::string::npos) << tail;

  r.stream = false;
  ResponseStream whole(r, TestTokenizer(), "r", "m", 1, Ids("p"));
  whole.AddTokens(
      Batch(Ids("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"), "stop"));
  const auto body = nlohmann::json::parse(whole.FullBody("stop", Usage{1, 2}, 0.5));
  const auto& message = body["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null()) << body;
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(message["tool_calls"][0]["type"], "function");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "tool_calls");
}

}  // namespace
}  // namespace pdserve::gateway
