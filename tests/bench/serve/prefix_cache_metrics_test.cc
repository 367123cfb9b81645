// The cached share: OpenAI's usage.prompt_tokens_details.cached_tokens read from stream chunks,
// the ideal of one unbounded cache in whole 16-token blocks, and the per-turn TTFT medians.
#include "bench/serve/prefix_cache_metrics.h"

#include <gtest/gtest.h>

#include "common/openai_stream_chunk.h"

namespace pdserve::bench {
namespace {

TEST(CachedTokens, AreReadFromTheUsageChunkWhereTheServerSendsThem) {
  auto chunk =
      ParseOpenAiStreamData(R"({"choices":[],"usage":{"prompt_tokens":40,"completion_tokens":3,)"
                            R"("prompt_tokens_details":{"cached_tokens":32}}})");
  ASSERT_TRUE(chunk.ok());
  ASSERT_TRUE(chunk->cached_prompt_tokens.has_value());
  EXPECT_EQ(*chunk->cached_prompt_tokens, 32);
  EXPECT_EQ(*chunk->prompt_tokens, 40);
  // Absent, null, negative or of the wrong type: none.
  for (const char* usage :
       {R"({"prompt_tokens":4})", R"({"prompt_tokens":4,"prompt_tokens_details":null})",
        R"({"prompt_tokens_details":{"cached_tokens":-1}})",
        R"({"prompt_tokens_details":{"cached_tokens":"32"}})",
        R"({"prompt_tokens_details":[32]})"}) {
    auto c = ParseOpenAiStreamData(std::string(R"({"choices":[],"usage":)") + usage + "}");
    ASSERT_TRUE(c.ok()) << usage;
    EXPECT_FALSE(c->cached_prompt_tokens.has_value()) << usage;
  }
  auto whole = ParseOpenAiResponse(
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens_details":{"cached_tokens":0}}})");
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->cached_prompt_tokens, 0);
}

TEST(IdealCache, CountsWholeBlocksAndNeverTheLastPromptToken) {
  EXPECT_EQ(WholeBlockTokens(0), 0);
  EXPECT_EQ(WholeBlockTokens(-5), 0);
  EXPECT_EQ(WholeBlockTokens(15), 0);
  EXPECT_EQ(WholeBlockTokens(16), 16);
  EXPECT_EQ(WholeBlockTokens(47), 32);
  // Turn k shares turn k-1's prompt and answer but the answer's last token.
  EXPECT_EQ(IdealLaterTurnCachedTokens(100, 20, 200), 112);  // 119 -> 112
  EXPECT_EQ(IdealLaterTurnCachedTokens(100, 13, 200), 112);  // 112 -> 112
  EXPECT_EQ(IdealLaterTurnCachedTokens(100, 12, 200), 96);   // 111 -> 96
  // Never the prompt's last token: a prompt of exactly 113 tokens computes at least one.
  EXPECT_EQ(IdealLaterTurnCachedTokens(100, 20, 113), 112);
  EXPECT_EQ(IdealLaterTurnCachedTokens(100, 20, 112), 96);
  EXPECT_EQ(IdealSharedPrefixCachedTokens(1024, 1100), 1024);
  EXPECT_EQ(IdealSharedPrefixCachedTokens(1024, 1024), 1008);
  EXPECT_EQ(IdealSharedPrefixCachedTokens(0, 50), 0);
}

RequestRecord Turn(int64_t conversation, int64_t turn, double ttft_s, int64_t prompt,
                   int64_t cached, int64_t ideal, bool success = true) {
  RequestRecord r;
  r.conversation = conversation;
  r.turn = turn;
  r.ttft_s = ttft_s;
  r.prompt_tokens = prompt;
  r.cached_tokens = cached;
  r.ideal_cached_tokens = ideal;
  r.success = success;
  return r;
}

TEST(PrefixCacheMetrics, SumsSharesAgainstTheIdealAndSplitsTtftByTurn) {
  std::vector<RequestRecord> records = {
      Turn(0, 0, 0.100, 100, 0, 0),
      Turn(0, 1, 0.020, 200, 96, 112),
      Turn(0, 2, 0.030, 300, 192, 208),
      Turn(1, 0, 0.300, 100, 96, 96),
      Turn(1, 1, 0.040, 200, 250, 112),  // a server claiming more than the prompt
      Turn(1, 2, 9.0, 300, 300, 300, /*success=*/false),
  };
  PrefixCacheMetrics m = CalculatePrefixCacheMetrics(records);
  EXPECT_TRUE(m.reported());
  EXPECT_EQ(m.reporting_requests, 5);
  EXPECT_EQ(m.prompt_tokens, 900);
  EXPECT_EQ(m.cached_tokens, 0 + 96 + 192 + 96 + 250);
  EXPECT_DOUBLE_EQ(m.cached_share, 634.0 / 900);
  EXPECT_EQ(m.ideal_cached_tokens, 0 + 112 + 208 + 96 + 112);
  EXPECT_DOUBLE_EQ(m.ideal_cached_share, 528.0 / 900);
  EXPECT_DOUBLE_EQ(m.share_of_ideal, 634.0 / 528);
  EXPECT_EQ(m.cached_above_prompt, 1);
  ASSERT_TRUE(m.multi_turn);
  ASSERT_EQ(m.median_ttft_ms_by_turn.size(), 3u);
  EXPECT_DOUBLE_EQ(m.median_ttft_ms_by_turn[0], 200);  // (100 + 300) / 2
  EXPECT_DOUBLE_EQ(m.median_ttft_ms_by_turn[1], 30);
  EXPECT_DOUBLE_EQ(m.median_ttft_ms_by_turn[2], 30);  // the failed turn is left out
  EXPECT_DOUBLE_EQ(m.median_ttft_ms_first_turn, 200);
  EXPECT_DOUBLE_EQ(m.median_ttft_ms_later_turns, 30);  // median of 20, 30, 40

  // Single requests from a server without the field: nothing reported, no turns.
  RequestRecord plain;
  plain.success = true;
  plain.prompt_tokens = 10;
  PrefixCacheMetrics none = CalculatePrefixCacheMetrics({plain});
  EXPECT_FALSE(none.reported());
  EXPECT_FALSE(none.ideal_known());
  EXPECT_FALSE(none.multi_turn);
  EXPECT_EQ(none.cached_share, 0);
}

}  // namespace
}  // namespace pdserve::bench
