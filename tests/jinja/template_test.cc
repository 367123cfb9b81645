// Tests for jinja/template.h: the engine's API (parse once, render many times, from several
// threads), registered functions and error reporting.
#include "jinja/template.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "jinja/builtins.h"

namespace pdserve::jinja {
namespace {

using ordered_json = nlohmann::ordered_json;

Template ParseOk(std::string_view source) {
  auto t = Template::Parse(source, "test.jinja");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(t).value();
}

TEST(TemplateTest, RendersVariables) {
  Template t = ParseOk(
      "{% for m in messages %}<{{ m.role }}>{{ m['content'] | trim }}\n{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}");
  ordered_json variables = {
      {"messages", {{{"role", "user"}, {"content", " hi "}}, {{"role", "bot"}, {"content", "yo"}}}},
      {"add_generation_prompt", true}};
  EXPECT_EQ(*t.Render(variables), "<user>hi\n<bot>yo\n<assistant>");
  // A plain nlohmann::json works too (its objects come in sorted key order).
  EXPECT_EQ(*t.Render(nlohmann::json::parse(ordered_json(variables).dump())),
            "<user>hi\n<bot>yo\n<assistant>");
  EXPECT_FALSE(t.Render(ordered_json::array()).ok());
}

TEST(TemplateTest, KeepsKeyOrderOfOrderedJson) {
  Template t = ParseOk("{{ d | tojson }}|{% for k in d %}{{ k }}{% endfor %}");
  EXPECT_EQ(*t.Render(ordered_json::parse(R"({"d": {"z": 1, "a": 2}})")),
            "{\"z\": 1, \"a\": 2}|za");
}

TEST(TemplateTest, RegisteredFunctionsErrorsPassThroughUnchanged) {
  Template t = ParseOk("a\n{% if bad %}{{ raise_exception('roles must alternate') }}{% endif %}");
  t.AddFunction("raise_exception", RaiseExceptionFunction());
  EXPECT_EQ(*t.Render(ordered_json{{"bad", false}}), "a\n");
  auto failed = t.Render(ordered_json{{"bad", true}});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(), "roles must alternate");
}

TEST(TemplateTest, UnregisteredFunctionIsUndefined) {
  Template t = ParseOk("{{ raise_exception('x') }}");
  auto failed = t.Render(ordered_json::object());
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "test.jinja:1: 'raise_exception' is undefined");
}

TEST(TemplateTest, RenderErrorsNameOriginAndLine) {
  Template t = ParseOk("line one\n{{ messages[0].content.nope.deeper }}");
  auto failed = t.Render(ordered_json{{"messages", {{{"content", "x"}}}}});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "test.jinja:2: 'str object' has no attribute 'nope'");
}

TEST(TemplateTest, ParseErrorsNameOriginAndLine) {
  auto bad = Template::Parse("ok\n{% include 'other.jinja' %}", "config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "config.json:2: the 'include' tag is not supported by pdserve's template engine");
  EXPECT_FALSE(Template::Parse(std::string("\xff"), "x").ok());  // not UTF-8
}

TEST(TemplateTest, RendersFromManyThreadsAtOnce) {
  Template t = ParseOk(
      "{% set ns = namespace(n=0) %}{% for i in range(count) %}{% set ns.n = ns.n + i %}"
      "{% endfor %}{{ ns.n }}");
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) results[i] = *t.Render(ordered_json{{"count", 100 + i}});
    });
  }
  for (auto& thread : threads) thread.join();
  for (int i = 0; i < 8; ++i) {
    int n = 100 + i;
    EXPECT_EQ(results[i], std::to_string(n * (n - 1) / 2));
  }
}

TEST(TemplateTest, DeepMacroRecursionFails) {
  Template t = ParseOk("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  auto failed = t.Render(ordered_json::object());
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("recursion"), std::string::npos);
}

}  // namespace
}  // namespace pdserve::jinja
