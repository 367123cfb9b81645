// Conversations against the in-process fake server: each turn leaves only after the previous
// answer arrived and carries it, the fake's prefix cache then serves what the ideal says, a
// failed turn ends its conversation, and conversations are capped by max_concurrency.
#include "bench/serve/conversation_runner.h"

#include <gtest/gtest.h>

#include <map>

#include "bench/serve/fake_openai_server.h"
#include "bench/serve/prefix_cache_metrics.h"

namespace pdserve::bench {
namespace {

HttpTarget Loopback(uint16_t port) { return {"127.0.0.1", std::to_string(port), ""}; }

std::vector<BenchConversation> Conversations(int64_t n, int64_t turns, int64_t system_len,
                                             int64_t output_len) {
  MultiTurnOptions options;
  options.num_conversations = n;
  options.turns = turns;
  options.system_prompt_len = system_len;
  options.user_turn_len = 24;
  options.output_len = output_len;
  options.seed = 3;
  auto conversations = SampleMultiTurnConversations(options);
  EXPECT_TRUE(conversations.ok());
  return std::move(conversations).value();
}

LoadOptions ChatLoad() {
  LoadOptions options;
  options.endpoint = "/v1/chat/completions";
  options.client.request_timeout_s = 10;
  return options;
}

RequestBodyOptions ChatBody() {
  RequestBodyOptions body;
  body.endpoint = "/v1/chat/completions";
  body.model = "fake";
  return body;
}

// The fake answers after 40 ms: with all conversations started at once, a turn that did not wait
// for its predecessor's answer would start within a few ms of it.
TEST(ConversationRunner, EachTurnWaitsForThePreviousAnswerAndCarriesIt) {
  FakeServerOptions server_options;
  server_options.ttft_s = 0.040;
  auto server = FakeOpenAiServer::Start(server_options);
  ASSERT_TRUE(server.ok());
  auto conversations = Conversations(3, 4, 40, 5);
  auto run = RunConversations(Loopback((*server)->port()), ChatLoad(), ChatBody(), conversations);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->records.size(), 12u);
  EXPECT_EQ(run->requests_not_sent, 0);
  EXPECT_EQ((*server)->requests_received(), 12);
  std::map<int64_t, const RequestRecord*> previous;
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.success) << r.error;
    ASSERT_GE(r.conversation, 0);
    auto it = previous.find(r.conversation);
    if (it == previous.end()) {
      EXPECT_EQ(r.turn, 0);
    } else {
      EXPECT_EQ(r.turn, it->second->turn + 1);
      EXPECT_GE(r.start_s, it->second->start_s + it->second->latency_s);
      EXPECT_GE(r.start_s - it->second->start_s, 0.039);
    }
    // The fake counts every message's words: system, users and the earlier answers (5 words
    // each, " hello" x 5).
    EXPECT_EQ(r.prompt_tokens, 40 + 24 * (r.turn + 1) + 5 * r.turn);
    previous[r.conversation] = &r;
  }
  // The three conversations ran side by side, not one after another.
  EXPECT_EQ(run->max_concurrent_requests, 3);
  EXPECT_LT(run->duration_s, 4 * 0.040 * 2.5);
}

// The fake's cache holds every prompt and answer: one conversation at a time, what it serves is
// what the ideal counts, turn by turn; a runner that dropped the answers from later turns would
// hit only the system prompt.
TEST(ConversationRunner, AnUnboundedCacheServesTheIdealShare) {
  FakeServerOptions server_options;
  server_options.prefix_cache = true;
  auto server = FakeOpenAiServer::Start(server_options);
  ASSERT_TRUE(server.ok());
  LoadOptions options = ChatLoad();
  options.max_concurrency = 1;
  auto conversations = Conversations(3, 3, 50, 7);
  auto run = RunConversations(Loopback((*server)->port()), options, ChatBody(), conversations);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->records.size(), 9u);
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.cached_tokens, r.ideal_cached_tokens) << r.conversation << "/" << r.turn;
  }
  EXPECT_EQ(run->records[0].cached_tokens, 0);   // nothing sent before
  EXPECT_EQ(run->records[3].cached_tokens, 48);  // the system prompt's whole blocks
  // Turn 2 of conversation 0: system 50 + user 24 + answer 7 - 1 = 80 tokens shared.
  EXPECT_EQ(run->records[1].cached_tokens, 80);
  PrefixCacheMetrics m = CalculatePrefixCacheMetrics(run->records);
  EXPECT_GT(m.cached_share, 0.5);
  EXPECT_DOUBLE_EQ(m.share_of_ideal, 1.0);
  EXPECT_EQ(m.cached_above_prompt, 0);
}

TEST(ConversationRunner, AFailedTurnEndsItsConversation) {
  FakeServerOptions server_options;
  // Requests in order (one conversation at a time): c0t0 ok, c0t1 fails; c1t0 .. c1t2 ok.
  server_options.faults = {FakeFault::kNone, FakeFault::kHttp500, FakeFault::kNone,
                           FakeFault::kNone, FakeFault::kNone};
  auto server = FakeOpenAiServer::Start(server_options);
  ASSERT_TRUE(server.ok());
  LoadOptions options = ChatLoad();
  options.max_concurrency = 1;
  auto run = RunConversations(Loopback((*server)->port()), options, ChatBody(),
                              Conversations(2, 3, 16, 2));
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->records.size(), 5u);
  EXPECT_EQ(run->requests_not_sent, 1);
  EXPECT_TRUE(run->records[0].success);
  EXPECT_FALSE(run->records[1].success);
  EXPECT_EQ(run->records[1].turn, 1);
  EXPECT_EQ(run->records[2].conversation, 1);
  EXPECT_EQ(run->records[2].turn, 0);
  EXPECT_EQ((*server)->requests_received(), 5);
  EXPECT_EQ(run->max_concurrent_requests, 1);
}

TEST(ConversationRunner, NeedsAChatEndpoint) {
  LoadOptions options = ChatLoad();
  options.endpoint = "/v1/completions";
  auto run = RunConversations(Loopback(1), options, ChatBody(), Conversations(1, 1, 0, 1));
  EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pdserve::bench
