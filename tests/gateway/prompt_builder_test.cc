// Tests for gateway/prompt_builder.h: chat through the template, token ids checked, the context
// and max_tokens checks, and the quota charged or refused.
#include "gateway/prompt_builder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tests/gateway/gateway_test_support.h"

namespace pdserve::gateway {
namespace {

using testing::Ids;
using testing::TestTokenizer;

GenerationRequest Completion(const std::string& prompt, std::optional<int> max_tokens = {}) {
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = max_tokens;
  return r;
}

class PromptBuilderTest : public ::testing::Test {
 protected:
  std::shared_ptr<GatewayMetrics> metrics = std::make_shared<GatewayMetrics>();
};

TEST_F(PromptBuilderTest, ACompletionIsTokenizedAndGetsTheContextsRoom) {
  PromptBuilder b(TestTokenizer(), 64, nullptr, metrics);
  auto built = b.Build(Completion("hello world"));
  ASSERT_TRUE(std::holds_alternative<BuiltPrompt>(built));
  const auto& p = std::get<BuiltPrompt>(built);
  EXPECT_EQ(p.prompt, TestTokenizer()->Encode("hello world", true).value());
  EXPECT_EQ(p.max_tokens, 64 - static_cast<int>(p.prompt.size()));
}

TEST_F(PromptBuilderTest, AChatIsRenderedThroughTheTemplate) {
  PromptBuilder b(TestTokenizer(), 4096, nullptr, metrics);
  GenerationRequest r;
  r.endpoint = Endpoint::kChatCompletions;
  r.messages = {{"developer", "be brief"}, {"user", "hi"}};
  auto built = b.Build(r);
  ASSERT_TRUE(std::holds_alternative<BuiltPrompt>(built));
  const std::vector<tokenizer::ChatMessage> messages = {{"system", "be brief"}, {"user", "hi"}};
  const auto text = TestTokenizer()->chat_template().Apply(messages, true);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(std::get<BuiltPrompt>(built).prompt, TestTokenizer()->Encode(*text, false).value());
}

TEST_F(PromptBuilderTest, BadPromptsAreTheClientsErrors) {
  PromptBuilder b(TestTokenizer(), 8, nullptr, metrics);
  auto refusal = [&](const GenerationRequest& r) { return std::get<PromptRefusal>(b.Build(r)); };
  GenerationRequest empty = Completion("");
  empty.prompt_token_ids = std::vector<int32_t>{};
  EXPECT_EQ(refusal(empty).error.message, "The prompt is empty");
  const PromptRefusal long_prompt = refusal(Completion("a b c d e f g h i j k l"));
  EXPECT_EQ(long_prompt.error.http_status, 413);
  EXPECT_EQ(long_prompt.error.code, "context_length_exceeded");
  const PromptRefusal too_many = refusal(Completion("a", 100));
  EXPECT_EQ(too_many.error.http_status, 400);
  EXPECT_EQ(too_many.error.param, "max_tokens");
  GenerationRequest ids = Completion("");
  ids.prompt_token_ids = std::vector<int32_t>{1, TestTokenizer()->vocab_size()};
  EXPECT_NE(refusal(ids).error.message.find("outside the vocabulary"), std::string::npos);
}

TEST_F(PromptBuilderTest, TheQuotaIsChargedForThePromptAndMaxTokens) {
  auto quota = std::make_shared<TenantQuota>(
      std::map<std::string, TenantLimits>{{"t", TenantLimits{0, 50}}});
  PromptBuilder b(TestTokenizer(), 4096, quota, metrics);
  BuiltPrompt p = std::get<BuiltPrompt>(b.Build(Completion("hello", 20)));
  EXPECT_FALSE(b.Charge("", p).has_value());  // no tenant: nothing charged
  EXPECT_EQ(p.quota_tokens, 0);
  EXPECT_FALSE(b.Charge("t", p).has_value());
  EXPECT_EQ(p.quota_tokens, static_cast<int64_t>(p.prompt.size()) + 20);
  BuiltPrompt again = std::get<BuiltPrompt>(b.Build(Completion("hello", 40)));
  const auto refusal = b.Charge("t", again);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->error.http_status, 429);
  EXPECT_GT(refusal->retry_after_s, 0);
}

}  // namespace
}  // namespace pdserve::gateway
