// Tests for jinja/filters.h: the text and number filters and the registry, called directly (the
// conformance test compares them with Jinja2 inside templates).
#include "jinja/filters.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jinja/value_text.h"
#include "tests/jinja/filter_calls.h"

namespace pdserve::jinja {
namespace {

using testing::Apply;
using testing::Json;
using testing::kMessages;

TEST(FiltersTest, TextFilters) {
  EXPECT_EQ(Apply("trim", Value::String("  a \n")), "a");
  EXPECT_EQ(Apply("upper", Value::Int(5)), "5");
  EXPECT_EQ(Apply("title", Value::String("hello wORLD-x")), "Hello World-X");
  EXPECT_EQ(Apply("capitalize", Value::String("hELLO")), "Hello");
  EXPECT_EQ(Apply("replace", Value::String("aaa"),
                  {Value::String("a"), Value::String("b"), Value::Int(2)}),
            "bba");
  EXPECT_EQ(Apply("indent", Value::String("a\n\nb"), {Value::Int(2)}), "a\n\n  b");
  EXPECT_EQ(Apply("escape", Value::String("<a href=\"x\">&'")),
            "&lt;a href=&#34;x&#34;&gt;&amp;&#39;");
}

TEST(FiltersTest, ConversionsAndDefaults) {
  EXPECT_EQ(Apply("int", Value::String("42.9")), "42");
  EXPECT_EQ(Apply("int", Value::String("x"), {Value::Int(-1)}), "-1");
  EXPECT_EQ(Apply("float", Value::String("1e3")), "1000.0");
  EXPECT_EQ(Apply("round", Value::Float(2.675), {Value::Int(2)}), "2.67");
  EXPECT_EQ(Apply("default", Value(), {Value::String("d")}), "d");
  EXPECT_EQ(Apply("default", Value::None(), {Value::String("d")}), "None");
  EXPECT_EQ(Apply("default", Value::String(""), {Value::String("d"), Value::Bool(true)}), "d");
  EXPECT_EQ(Apply("string", Json("[1]")), "[1]");
}

TEST(FiltersTest, ToJsonTakesTransformersArguments) {
  Value v = Json(R"({"b": "\u00e9", "a": [1]})");
  EXPECT_EQ(Apply("tojson", v), "{\"b\": \"\u00e9\", \"a\": [1]}");
  EXPECT_EQ(Apply("tojson", v, {}, {{"indent", Value::Int(1)}, {"sort_keys", Value::Bool(true)}}),
            "{\n \"a\": [\n  1\n ],\n \"b\": \"\u00e9\"\n}");
  EXPECT_EQ(Apply("tojson", v, {Value::Bool(true)}), "{\"b\": \"\\u00e9\", \"a\": [1]}");
}

TEST(FiltersTest, KnowsWhatItDoesNotSupport) {
  EXPECT_EQ(FindFilter("groupby"), nullptr);
  EXPECT_TRUE(IsUnsupportedJinjaFilter("groupby"));
  EXPECT_FALSE(IsUnsupportedJinjaFilter("nosuch"));
  EXPECT_NE(FindFilter("d"), nullptr);
  EXPECT_EQ(Apply("nosuch", Value()), "ERROR: No filter named 'nosuch'.");
}

}  // namespace
}  // namespace pdserve::jinja
