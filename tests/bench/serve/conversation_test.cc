// Multi-turn conversations: the synthetic ones (one system prompt shared word for word, turn
// lengths, seeds), the messages a turn sends, and ShareGPT replay of every human turn.
#include "bench/serve/conversation.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace pdserve::bench {
namespace {

int64_t Words(const std::string& text) {
  int64_t n = 0;
  bool in_word = false;
  for (char c : text) {
    if (c != ' ' && !in_word) ++n;
    in_word = c != ' ';
  }
  return n;
}

TEST(MultiTurnDataset, SharesOneSystemPromptAndDrawsUserTurnsFromTheSeed) {
  MultiTurnOptions options;
  options.num_conversations = 5;
  options.turns = 3;
  options.system_prompt_len = 100;
  options.user_turn_len = 20;
  options.output_len = 7;
  options.seed = 11;
  auto conversations = SampleMultiTurnConversations(options);
  ASSERT_TRUE(conversations.ok()) << conversations.status().ToString();
  ASSERT_EQ(conversations->size(), 5u);
  EXPECT_EQ(CountTurns(*conversations), 15);
  const std::string& system = (*conversations)[0].system_prompt;
  EXPECT_EQ(Words(system), 100);
  for (const BenchConversation& c : *conversations) {
    EXPECT_EQ(c.system_prompt, system);  // same words, so a prefix cache can hit
    EXPECT_EQ(c.system_tokens, 100);
    ASSERT_EQ(c.turns.size(), 3u);
    for (const BenchTurn& t : c.turns) {
      EXPECT_EQ(Words(t.user), 20);
      EXPECT_EQ(t.user_tokens, 20);
      EXPECT_EQ(t.output_len, 7);
    }
  }
  // User turns differ from each other.
  EXPECT_NE((*conversations)[0].turns[0].user, (*conversations)[1].turns[0].user);
  EXPECT_NE((*conversations)[0].turns[0].user, (*conversations)[0].turns[1].user);

  auto again = SampleMultiTurnConversations(options);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[4].turns[2].user, (*conversations)[4].turns[2].user);
  EXPECT_EQ((*again)[0].system_prompt, system);
  options.seed = 12;
  auto other = SampleMultiTurnConversations(options);
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)[0].system_prompt, system);
  EXPECT_NE((*other)[0].turns[0].user, (*conversations)[0].turns[0].user);
}

TEST(MultiTurnDataset, FitsLengthsWithACounterAndRejectsBadOptions) {
  // A counter that sees two tokens per word: the words are halved to hit the token lengths.
  TokenCounter two_per_word = [](std::string_view text) { return 2 * Words(std::string(text)); };
  MultiTurnOptions options;
  options.num_conversations = 2;
  options.turns = 2;
  options.system_prompt_len = 64;
  options.user_turn_len = 32;
  auto conversations = SampleMultiTurnConversations(options, two_per_word);
  ASSERT_TRUE(conversations.ok());
  EXPECT_EQ((*conversations)[0].system_tokens, 64);
  EXPECT_EQ(Words((*conversations)[0].system_prompt), 32);
  EXPECT_EQ((*conversations)[1].turns[1].user_tokens, 32);

  options.system_prompt_len = 0;
  conversations = SampleMultiTurnConversations(options);
  ASSERT_TRUE(conversations.ok());
  EXPECT_TRUE((*conversations)[0].system_prompt.empty());
  options.turns = 0;
  EXPECT_FALSE(SampleMultiTurnConversations(options).ok());
  options.turns = 1;
  options.num_conversations = 0;
  EXPECT_FALSE(SampleMultiTurnConversations(options).ok());
}

TEST(TurnMessages, AlternateUserAndTheServersAnswersAfterTheSystemPrompt) {
  BenchConversation c;
  c.system_prompt = "be brief";
  c.turns = {{"first question", 2, 4}, {"second question", 2, 4}, {"third question", 2, 4}};
  std::vector<std::string> answers = {"answer one", "answer two"};
  nlohmann::json first = TurnMessages(c, 0, {});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0]["role"], "system");
  EXPECT_EQ(first[0]["content"], "be brief");
  EXPECT_EQ(first[1]["role"], "user");
  EXPECT_EQ(first[1]["content"], "first question");
  nlohmann::json third = TurnMessages(c, 2, answers);
  ASSERT_EQ(third.size(), 6u);
  const char* roles[] = {"system", "user", "assistant", "user", "assistant", "user"};
  const char* contents[] = {"be brief",        "first question", "answer one",
                            "second question", "answer two",     "third question"};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(third[i]["role"], roles[i]) << i;
    EXPECT_EQ(third[i]["content"], contents[i]) << i;
  }
  c.system_prompt.clear();
  EXPECT_EQ(TurnMessages(c, 1, answers)[0]["role"], "user");  // no system message
}

class ShareGptConversations : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::string(PDSERVE_TEST_TMP) + "/sharegpt_turns.json";
    std::filesystem::create_directories(PDSERVE_TEST_TMP);
    std::ofstream out(path_);
    out << R"([
      {"id": "a", "conversations": [
        {"from": "system", "value": "you are kind"},
        {"from": "human", "value": "one two three"},
        {"from": "gpt", "value": "reply of sixteen bytes"},
        {"from": "human", "value": "four five"},
        {"from": "gpt", "value": "r2"},
        {"from": "human", "value": "six"},
        {"from": "gpt", "value": "r3"}]},
      {"id": "b", "conversations": [
        {"from": "human", "value": "alone"},
        {"from": "human", "value": "out of order"}]},
      {"id": "c", "conversations": [
        {"from": "user", "value": "hello there"},
        {"from": "assistant", "value": "hi"},
        {"from": "gpt", "value": "out of order"},
        {"from": "human", "value": "never sent"},
        {"from": "gpt", "value": "x"}]},
      {"id": "d"}
    ])";
  }
  std::string path_;
};

TEST_F(ShareGptConversations, ReplaysHumanTurnsInOrderWithTheirRepliesLengths) {
  ShareGptTurnsOptions options;
  options.num_conversations = 2;
  options.max_turns = 6;
  auto conversations = LoadShareGptConversations(path_, options, nullptr);
  ASSERT_TRUE(conversations.ok()) << conversations.status().ToString();
  ASSERT_EQ(conversations->size(), 2u);  // "b" has no turn with a reply, "d" no conversation
  const BenchConversation* a = nullptr;
  const BenchConversation* c = nullptr;
  for (const BenchConversation& conv : *conversations) {
    (conv.system_prompt.empty() ? c : a) = &conv;
  }
  ASSERT_TRUE(a != nullptr && c != nullptr);
  EXPECT_EQ(a->system_prompt, "you are kind");
  ASSERT_EQ(a->turns.size(), 3u);
  EXPECT_EQ(a->turns[0].user, "one two three");
  EXPECT_EQ(a->turns[0].output_len, 6);  // 22 bytes / 4, rounded up
  EXPECT_EQ(a->turns[1].user, "four five");
  EXPECT_EQ(a->turns[2].user, "six");
  ASSERT_EQ(c->turns.size(), 1u);  // ends at the entry out of order
  EXPECT_EQ(c->turns[0].user, "hello there");

  options.max_turns = 2;
  options.fixed_output_len = 9;
  conversations = LoadShareGptConversations(path_, options, nullptr);
  ASSERT_TRUE(conversations.ok());
  for (const BenchConversation& conv : *conversations) {
    EXPECT_LE(conv.turns.size(), 2u);
    for (const BenchTurn& t : conv.turns) EXPECT_EQ(t.output_len, 9);
  }
  options.num_conversations = 3;  // only two are usable
  EXPECT_EQ(LoadShareGptConversations(path_, options, nullptr).status().code(),
            StatusCode::kInvalidArgument);
  // Without a count, conversations are taken until the turns reach min_requests.
  options.num_conversations = 0;
  options.min_requests = 1;
  conversations = LoadShareGptConversations(path_, options, nullptr);
  ASSERT_TRUE(conversations.ok());
  EXPECT_EQ(conversations->size(), 1u);
  EXPECT_EQ(LoadShareGptConversations(path_ + ".missing", options, nullptr).status().code(),
            StatusCode::kNotFound);
}

}  // namespace
}  // namespace pdserve::bench
