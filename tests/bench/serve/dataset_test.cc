// Random, ShareGPT and JSONL prompt sources.
#include "bench/serve/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace pdserve::bench {
namespace {

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::filesystem::create_directories(PDSERVE_TEST_TMP);
  std::string path = std::string(PDSERVE_TEST_TMP) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

int64_t Words(const std::string& s) {
  int64_t n = s.empty() ? 0 : 1;
  for (char c : s) n += c == ' ';
  return n;
}

TEST(Dataset, RandomPromptsHaveLengthsInRange) {
  RandomDatasetOptions options;
  options.num_prompts = 200;
  options.input_len = 100;
  options.output_len = 20;
  options.range_ratio = 0.5;
  options.seed = 3;
  auto prompts = SampleRandomPrompts(options);
  ASSERT_TRUE(prompts.ok());
  ASSERT_EQ(prompts->size(), 200u);
  bool varied = false;
  for (const auto& p : *prompts) {
    EXPECT_GE(p.prompt_tokens, 50);
    EXPECT_LE(p.prompt_tokens, 150);
    EXPECT_EQ(p.prompt_tokens, Words(p.prompt));
    EXPECT_GE(p.output_len, 10);
    EXPECT_LE(p.output_len, 30);
    varied |= p.prompt_tokens != (*prompts)[0].prompt_tokens;
  }
  EXPECT_TRUE(varied);
  options.range_ratio = 1.0;
  EXPECT_FALSE(SampleRandomPrompts(options).ok());
}

// With a tokenizer that splits some words in two, the prompts are fitted to the length in tokens
// (to within one word), not in words: a 1024-token prompt is 1024 tokens to the server too.
TEST(Dataset, RandomPromptsAreFittedToTheirLengthInTokensWithACounter) {
  RandomDatasetOptions options;
  options.num_prompts = 50;
  options.input_len = 1000;
  options.output_len = 8;
  options.seed = 5;
  auto counter = [](std::string_view text) {  // two tokens for words of more than three letters
    int64_t tokens = 0, letters = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (i == text.size() || text[i] == ' ') {
        tokens += letters > 3 ? 2 : 1;
        letters = 0;
      } else {
        ++letters;
      }
    }
    return tokens;
  };
  auto prompts = SampleRandomPrompts(options, counter);
  ASSERT_TRUE(prompts.ok());
  for (size_t i = 0; i < prompts->size(); ++i) {
    const auto& p = (*prompts)[i];
    EXPECT_EQ(p.prompt_tokens, counter(p.prompt));
    EXPECT_LE(std::abs(p.prompt_tokens - 1000), 2) << "prompt " << i;
    EXPECT_LT(Words(p.prompt), 900) << "fewer words than tokens";
  }
}

TEST(Dataset, ShareGptTakesFirstTurnsAndFilters) {
  std::string path = WriteTemp("sharegpt.json", R"([
    {"conversations":[{"from":"human","value":"tell me about the river and the stone"},
                      {"from":"gpt","value":"the river runs over the stone all day long"}]},
    {"conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"hello there friend"}]},
    {"conversations":[{"from":"human","value":"only one turn here"}]},
    {"id":"no conversations"}
  ])");
  auto prompts = LoadShareGptPrompts(path, 1, 0, std::nullopt, nullptr);
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  EXPECT_EQ((*prompts)[0].prompt, "tell me about the river and the stone");
  EXPECT_EQ((*prompts)[0].output_len, EstimateTokens("the river runs over the stone all day long"));
  EXPECT_FALSE(LoadShareGptPrompts(path, 2, 0, std::nullopt, nullptr).ok());  // "hi" too short
  EXPECT_FALSE(LoadShareGptPrompts(WriteTemp("bad.json", "{}"), 1, 0, {}, nullptr).ok());
  EXPECT_EQ(LoadShareGptPrompts("/nonexistent/x.json", 1, 0, {}, nullptr).status().code(),
            StatusCode::kNotFound);
}

TEST(Dataset, JsonlAcceptsStringsAndObjectsAndRepeats) {
  std::string path = WriteTemp("prompts.jsonl",
                               "\"plain prompt\"\n\n{\"prompt\":\"with len\",\"max_tokens\":7}\n");
  auto counter = [](std::string_view s) { return int64_t(s.size()); };
  auto prompts = LoadJsonlPrompts(path, 3, 50, counter);
  ASSERT_TRUE(prompts.ok()) << prompts.status().ToString();
  ASSERT_EQ(prompts->size(), 3u);
  EXPECT_EQ((*prompts)[0].prompt, "plain prompt");
  EXPECT_EQ((*prompts)[0].output_len, 50);
  EXPECT_EQ((*prompts)[0].prompt_tokens, 12);
  EXPECT_EQ((*prompts)[1].output_len, 7);
  EXPECT_EQ((*prompts)[2].prompt, "plain prompt");
  auto bad = LoadJsonlPrompts(WriteTemp("bad.jsonl", "\"ok\"\n{\"max_tokens\":3}\n"), 1, 5, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":2:"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace pdserve::bench
