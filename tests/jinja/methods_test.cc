// Tests for jinja/methods.h: str, dict and list methods, a loop's attributes, and the methods
// the immutable sandbox refuses.
#include "jinja/methods.h"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>

#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

Value Json(const char* text) { return Value::FromJson(nlohmann::ordered_json::parse(text)); }

Result<Value> Call(const Value& self, std::string_view name, std::vector<Value> args = {}) {
  std::optional<Value> method = FindMethod(self, name);
  if (!method || !method->is_callable()) return InvalidArgument("no method");
  return method->callable().function(Arguments{std::move(args), {}});
}

TEST(MethodsTest, StringMethods) {
  Value s = Value::String("  Hello World  ");
  EXPECT_EQ(Call(s, "strip")->string(), "Hello World");
  EXPECT_EQ(Str(*Call(Value::String("a b  c"), "split")), "['a', 'b', 'c']");
  EXPECT_EQ(Str(*Call(Value::String("a</t>b"), "split", {Value::String("</t>")})), "['a', 'b']");
  EXPECT_TRUE(Call(Value::String("hello"), "startswith", {Value::String("he")})->bool_value());
  EXPECT_TRUE(Call(Value::String("hello"), "endswith",
                   {Value::Tuple({Value::String("x"), Value::String("lo")})})
                  ->bool_value());
  EXPECT_EQ(Call(Value::String("abc"), "upper")->string(), "ABC");
  EXPECT_EQ(
      Call(Value::String("a-b"), "replace", {Value::String("-"), Value::String("+")})->string(),
      "a+b");
  EXPECT_EQ(Call(Value::String(", "), "join", {Json(R"(["a", "b"])")})->string(), "a, b");
  EXPECT_FALSE(Call(Value::String(","), "join", {Json("[1]")}).ok());
  EXPECT_FALSE(FindMethod(Value::String("x"), "nosuch").has_value());
}

TEST(MethodsTest, DictMethods) {
  Value d = Json(R"({"b": 1, "a": 2})");
  EXPECT_EQ(Str(*Call(d, "items")), "[('b', 1), ('a', 2)]");
  EXPECT_EQ(Str(*Call(d, "keys")), "['b', 'a']");
  EXPECT_EQ(Call(d, "get", {Value::String("a")})->int_value(), 2);
  EXPECT_TRUE(Call(d, "get", {Value::String("z")})->is_none());
  EXPECT_EQ(Call(d, "get", {Value::String("z"), Value::Int(5)})->int_value(), 5);
}

TEST(MethodsTest, MutatingMethodsAreUnsafe) {
  std::optional<Value> append = FindMethod(Json("[1]"), "append");
  ASSERT_TRUE(append.has_value());
  ASSERT_TRUE(append->is_undefined());
  EXPECT_EQ(append->string(), "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_TRUE(FindMethod(Json("{}"), "update")->is_undefined());
}

TEST(MethodsTest, LoopAttributes) {
  auto loop = std::make_shared<LoopState>();
  loop->items = std::make_shared<const Sequence>(
      Sequence{SequenceKind::kList, {Value::Int(10), Value::Int(20), Value::Int(30)}});
  loop->index0 = 1;
  Value v = Value::Loop(loop);
  EXPECT_EQ(FindMethod(v, "index")->int_value(), 2);
  EXPECT_EQ(FindMethod(v, "revindex")->int_value(), 2);
  EXPECT_EQ(FindMethod(v, "length")->int_value(), 3);
  EXPECT_FALSE(FindMethod(v, "first")->bool_value());
  EXPECT_EQ(FindMethod(v, "previtem")->int_value(), 10);
  EXPECT_EQ(FindMethod(v, "nextitem")->int_value(), 30);
  EXPECT_EQ(Call(v, "cycle", {Value::String("a"), Value::String("b")})->string(), "b");
  loop->index0 = 2;
  EXPECT_TRUE(FindMethod(v, "last")->bool_value());
  EXPECT_TRUE(FindMethod(v, "nextitem")->is_undefined());
}

}  // namespace
}  // namespace pdserve::jinja
