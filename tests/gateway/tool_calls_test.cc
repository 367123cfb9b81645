#include "gateway/tool_calls.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/grammar_matcher.h"
#include "grammar/json_grammar.h"

namespace pdserve::gateway {
namespace {

TEST(ToolCallsTest, TheFormatComesFromTheTemplatesSyntax) {
  EXPECT_EQ(DetectToolCallFormat("{{- '<tool_call>\\n' }}"), ToolCallFormat::kHermes);
  EXPECT_EQ(DetectToolCallFormat("[TOOL_CALLS] {{ tool_calls|tojson }}"), ToolCallFormat::kMistral);
  EXPECT_EQ(DetectToolCallFormat("{{- '<|python_tag|>' }}"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(DetectToolCallFormat("{% for m in messages %}{{ m.content }}{% endfor %}"),
            ToolCallFormat::kNone);
  EXPECT_STREQ(ToolCallFormatName(ToolCallFormat::kHermes), "hermes");
}

TEST(ToolCallsTest, HermesBlocksAfterContent) {
  const auto out = ParseToolCalls(
      ToolCallFormat::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
      "</tool_call>");
  EXPECT_EQ(out.content, "Let me check.");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(out.calls[1].arguments, "{}");
  // A block that is not a call leaves the whole text as content.
  const std::string broken = "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>";
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kHermes, broken).content, broken);
  EXPECT_TRUE(ParseToolCalls(ToolCallFormat::kHermes, broken).calls.empty());
  EXPECT_TRUE(ParseToolCalls(ToolCallFormat::kHermes, "no call here").calls.empty());
}

TEST(ToolCallsTest, Llama3JsonAndMistralArrays) {
  auto llama = ParseToolCalls(
      ToolCallFormat::kLlama3Json,
      R"({"name": "f", "parameters": {"x": "a;b"}}; {"name": "g", "parameters": {}})");
  ASSERT_EQ(llama.calls.size(), 2u);
  EXPECT_EQ(llama.calls[0].arguments, R"({"x":"a;b"})");
  EXPECT_EQ(llama.calls[1].name, "g");
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kLlama3Json,
                           R"(<|python_tag|>{"name": "f", "parameters": {}})")
                .calls.size(),
            1u);
  EXPECT_TRUE(ParseToolCalls(ToolCallFormat::kLlama3Json, "{not json").calls.empty());
  EXPECT_TRUE(ParseToolCalls(ToolCallFormat::kLlama3Json, "Hello {\"name\": \"f\"}").calls.empty());
  auto mistral = ParseToolCalls(ToolCallFormat::kMistral,
                                R"([TOOL_CALLS] [{"name": "f", "arguments": {"n": 1}}])");
  ASSERT_EQ(mistral.calls.size(), 1u);
  EXPECT_EQ(mistral.calls[0].arguments, R"({"n":1})");
}

TEST(ToolCallsTest, TheSplitterStreamsContentAndHoldsWhatMayBeACall) {
  ToolCallSplitter s(ToolCallFormat::kHermes);
  EXPECT_EQ(s.Push("Sure. <to"), "Sure. ");  // "<to" may begin <tool_call>
  EXPECT_EQ(s.Push("day> is"), "<today> is");
  EXPECT_EQ(s.Push(" fine.\n<tool_"), " fine.\n");
  EXPECT_EQ(s.Push("call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>"), "");
  const auto out = s.Finish();
  EXPECT_EQ(out.content, "");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "f");

  ToolCallSplitter llama(ToolCallFormat::kLlama3Json);
  EXPECT_EQ(llama.Push("  "), "");
  EXPECT_EQ(llama.Push("{\"name\": "), "");
  EXPECT_EQ(llama.Push("\"f\", \"parameters\": {}}"), "");
  EXPECT_EQ(llama.Finish().calls.size(), 1u);
  ToolCallSplitter prose(ToolCallFormat::kLlama3Json);
  EXPECT_EQ(prose.Push("Hello"), "Hello");
  EXPECT_EQ(prose.Push(" {x}"), " {x}");
  ToolCallSplitter tag(ToolCallFormat::kLlama3Json);
  EXPECT_EQ(tag.Push("<|py"), "");  // may be <|python_tag|>
  EXPECT_EQ(tag.Push("thon_tag|>{\"name\": \"f\", \"parameters\": {}}"), "");
  EXPECT_EQ(tag.Finish().calls.size(), 1u);
  ToolCallSplitter angle(ToolCallFormat::kLlama3Json);
  EXPECT_EQ(angle.Push("<"), "");
  EXPECT_EQ(angle.Push("b> bold"), "<b> bold");  // not the tag: streamed at once
  ToolCallSplitter none(ToolCallFormat::kNone);
  EXPECT_EQ(none.Push("<tool_call>"), "<tool_call>");
}

// tool_choice required: the grammar admits exactly a call of one of the tools, in the syntax.
TEST(ToolCallsTest, TheForcedCallsGrammarAdmitsOnlyValidCalls) {
  const std::vector<ToolSpec> tools = {
      {"get_weather",
       R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})"},
      {"get_time", R"({"type":"object"})"}};
  auto g = ToolChoiceGrammarFor(ToolCallFormat::kHermes, tools);
  ASSERT_TRUE(g.ok());
  auto compiled = grammar::CompileJsonSchemaText(g->schema, g->prefix, g->suffix);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  auto admits = [&](const std::string& text) {
    grammar::GrammarMatcher m(*compiled);
    return m.Advance(text) && m.IsTerminated();
  };
  const std::string call =
      "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}\n</tool_call>";
  EXPECT_TRUE(admits(call));
  EXPECT_EQ(ParseToolCalls(ToolCallFormat::kHermes, call).calls.at(0).arguments,
            R"({"city":"Oslo"})");
  EXPECT_TRUE(admits("<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>"));
  EXPECT_FALSE(admits("<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{}}\n</tool_call>"));
  EXPECT_FALSE(admits("<tool_call>\n{\"name\":\"other\",\"arguments\":{}}\n</tool_call>"));
  auto llama = ToolChoiceGrammarFor(ToolCallFormat::kLlama3Json, {tools[1]});
  ASSERT_TRUE(llama.ok());
  EXPECT_NE(llama->schema.find("\"parameters\""), std::string::npos);
  EXPECT_FALSE(ToolChoiceGrammarFor(ToolCallFormat::kNone, tools).ok());
}

}  // namespace
}  // namespace pdserve::gateway
