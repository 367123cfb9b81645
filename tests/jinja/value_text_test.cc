// Tests for jinja/value_text.h: Python's str()/repr() of values and transformers' json.dumps.
#include "jinja/value_text.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pdserve::jinja {
namespace {

Value Json(const char* text) { return Value::FromJson(nlohmann::ordered_json::parse(text)); }

TEST(ValueTextTest, StrIsPythons) {
  EXPECT_EQ(Str(Value()), "");
  EXPECT_EQ(Str(Value::None()), "None");
  EXPECT_EQ(Str(Value::Bool(true)), "True");
  EXPECT_EQ(Str(Value::Int(-3)), "-3");
  EXPECT_EQ(Str(Value::Float(2.0)), "2.0");
  EXPECT_EQ(Str(Value::String("it's")), "it's");
  EXPECT_EQ(Str(Json(R"([1, "a", null, true, 1.5, {"k": "v"}])")),
            "[1, 'a', None, True, 1.5, {'k': 'v'}]");
  EXPECT_EQ(Str(Value::Tuple({Value::Int(1)})), "(1,)");
  EXPECT_EQ(Str(Value::Tuple({})), "()");
  EXPECT_EQ(Str(Value::List({Value(), Value::String("it's")})), "[Undefined, \"it's\"]");
}

TEST(ValueTextTest, JsonDumpsWithTransformersDefaults) {
  Value v = Json(R"({"b": [1, 2.0, null, true], "a": "\u00e9\"\n\u0001", "e": {}, "l": []})");
  EXPECT_EQ(*ToJson(v, {}),
            "{\"b\": [1, 2.0, null, true], \"a\": \"\u00e9\\\"\\n\\u0001\", \"e\": {}, \"l\": []}");
  JsonOptions indented;
  indented.indent = "  ";
  EXPECT_EQ(*ToJson(Json(R"({"a": [1, {"b": 2}], "c": []})"), indented),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2\n    }\n  ],\n  \"c\": []\n}");
  JsonOptions ascii_sorted;
  ascii_sorted.ensure_ascii = true;
  ascii_sorted.sort_keys = true;
  EXPECT_EQ(*ToJson(Json(R"({"z": "\u00e9\ud83d\ude00", "a": 1})"), ascii_sorted),
            "{\"a\": 1, \"z\": \"\\u00e9\\ud83d\\ude00\"}");
  JsonOptions compact;
  compact.separators.emplace(",", ":");
  EXPECT_EQ(*ToJson(Json(R"({"a": [1, 2]})"), compact), "{\"a\":[1,2]}");
  EXPECT_EQ(*ToJson(Value::Float(1e16), {}), "1e+16");
  EXPECT_EQ(*ToJson(Value::Tuple({Value::Int(1)}), {}), "[1]");
}

TEST(ValueTextTest, JsonRefusesWhatPythonCannotSerialize) {
  auto undefined = ToJson(Value(), {});
  ASSERT_FALSE(undefined.ok());
  EXPECT_EQ(undefined.status().message(), "Object of type Undefined is not JSON serializable");
  EXPECT_FALSE(ToJson(Value::Iterator({}), {}).ok());
}

}  // namespace
}  // namespace pdserve::jinja
