// Tests for jinja/operations.h: Python's truthiness, comparisons, arithmetic, len/iter, and
// Jinja2's attribute and item lookup with Undefined for misses.
#include "jinja/operations.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

Value Json(const char* text) { return Value::FromJson(nlohmann::ordered_json::parse(text)); }
Value S(const char* s) { return Value::String(s); }
Value I(int64_t i) { return Value::Int(i); }

TEST(OperationsTest, Truthiness) {
  EXPECT_FALSE(Truthy(Value()));
  EXPECT_FALSE(Truthy(Value::None()));
  EXPECT_FALSE(Truthy(I(0)));
  EXPECT_FALSE(Truthy(Value::Float(0.0)));
  EXPECT_FALSE(Truthy(S("")));
  EXPECT_FALSE(Truthy(Value::List({})));
  EXPECT_FALSE(Truthy(Json("{}")));
  EXPECT_TRUE(Truthy(Value::Iterator({})));  // a generator is always true
  EXPECT_TRUE(Truthy(S(" ")));
}

TEST(OperationsTest, EqualityAndOrdering) {
  EXPECT_TRUE(Equals(I(1), Value::Float(1.0)));
  EXPECT_TRUE(Equals(Value::Bool(true), I(1)));
  EXPECT_TRUE(Equals(Json(R"({"a": [1]})"), Json(R"({"a": [1.0]})")));
  EXPECT_FALSE(Equals(Value::List({I(1)}), Value::Tuple({I(1)})));
  EXPECT_TRUE(Equals(Value(), Value()));
  EXPECT_FALSE(Equals(S("1"), I(1)));
  EXPECT_TRUE(*Compare("<", S("a"), S("b")));
  EXPECT_TRUE(*Compare("<", Json("[1, 2]"), Json("[1, 2, 0]")));
  EXPECT_TRUE(*Compare(">=", Value::Float(2.5), I(2)));
  EXPECT_FALSE(Compare("<", S("a"), I(1)).ok());
  EXPECT_FALSE(Compare("<", Value::Undefined("'u' is undefined"), I(1)).ok());
}

TEST(OperationsTest, Membership) {
  EXPECT_TRUE(*Contains(S("hello"), S("ell")));
  EXPECT_TRUE(*Contains(Json("[1, 2]"), Value::Float(2.0)));
  EXPECT_TRUE(*Contains(Json(R"({"k": 1})"), S("k")));
  EXPECT_FALSE(*Contains(Value(), I(1)));
  EXPECT_FALSE(Contains(S("abc"), I(1)).ok());
  EXPECT_FALSE(Contains(I(5), I(1)).ok());
}

TEST(OperationsTest, ArithmeticFollowsPython) {
  EXPECT_EQ(Str(*BinaryOp("+", I(1), I(2))), "3");
  EXPECT_EQ(Str(*BinaryOp("/", I(6), I(3))), "2.0");
  EXPECT_EQ(Str(*BinaryOp("//", I(-7), I(2))), "-4");
  EXPECT_EQ(Str(*BinaryOp("%", I(-7), I(3))), "2");
  EXPECT_EQ(Str(*BinaryOp("%", Value::Float(-7.5), I(2))), "0.5");
  EXPECT_EQ(Str(*BinaryOp("**", I(2), I(10))), "1024");
  EXPECT_EQ(Str(*BinaryOp("**", I(2), I(-1))), "0.5");
  EXPECT_EQ(Str(*BinaryOp("+", S("a"), S("b"))), "ab");
  EXPECT_EQ(Str(*BinaryOp("*", S("ab"), I(2))), "abab");
  EXPECT_EQ(Str(*BinaryOp("+", Json("[1]"), Json("[2]"))), "[1, 2]");
  EXPECT_FALSE(BinaryOp("/", I(1), I(0)).ok());
  EXPECT_FALSE(BinaryOp("+", S("a"), I(1)).ok());
  EXPECT_FALSE(BinaryOp("*", I(INT64_MAX), I(2)).ok());  // 64-bit integers
  EXPECT_EQ(Str(*UnaryOp("-", Value::Bool(true))), "-1");
}

TEST(OperationsTest, LengthAndIteration) {
  EXPECT_EQ(*Length(S("h\u00e9")), 2);
  EXPECT_EQ(*Length(Value()), 0);
  EXPECT_FALSE(Length(Value::Iterator({})).ok());
  EXPECT_FALSE(Length(I(3)).ok());
  auto chars = Iterate(S("a\u00e9"));
  ASSERT_EQ(chars->size(), 2u);
  EXPECT_EQ((*chars)[1].string(), "\u00e9");
  auto keys = Iterate(Json(R"({"b": 1, "a": 2})"));
  EXPECT_EQ((*keys)[0].string(), "b");
  EXPECT_TRUE(Iterate(Value())->empty());
  EXPECT_FALSE(Iterate(Value::None()).ok());
}

TEST(OperationsTest, AttributeFallsBackToItemAndItemToAttribute) {
  Value message = Json(R"({"role": "user", "content": "hi"})");
  EXPECT_EQ(GetAttr(message, "role")->string(), "user");
  EXPECT_TRUE(GetAttr(message, "items")->is_callable());  // dict methods win over keys
  Value missing = *GetAttr(message, "nope");
  ASSERT_TRUE(missing.is_undefined());
  EXPECT_EQ(missing.string(), "'dict object' has no attribute 'nope'");
  EXPECT_EQ(GetItem(message, S("content"))->string(), "hi");
  EXPECT_TRUE(GetItem(message, S("get"))->is_callable());
  Value list = Json("[10, 20, 30]");
  EXPECT_EQ(GetItem(list, I(-1))->int_value(), 30);
  EXPECT_TRUE(GetItem(list, I(3))->is_undefined());
  EXPECT_EQ(GetItem(S("h\u00e9"), I(1))->string(), "\u00e9");
  // Using an Undefined is an error that says what was missing.
  auto error = GetAttr(missing, "x");
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().message(), "'dict object' has no attribute 'nope'");
}

TEST(OperationsTest, SlicesLikePython) {
  Value none = Value::None();
  EXPECT_EQ(GetSlice(S("Hello"), I(1), I(3), none)->string(), "el");
  EXPECT_EQ(GetSlice(S("Hello"), none, none, I(-1))->string(), "olleH");
  EXPECT_EQ(GetSlice(S("h\u00e9llo"), I(-3), none, none)->string(), "llo");
  EXPECT_EQ(Str(*GetSlice(Json("[1, 2, 3, 4]"), I(1), none, I(2))), "[2, 4]");
  EXPECT_EQ(Str(*GetSlice(Json("[1, 2, 3]"), I(-100), I(100), none)), "[1, 2, 3]");
  EXPECT_FALSE(GetSlice(S("a"), none, none, I(0)).ok());
}

}  // namespace
}  // namespace pdserve::jinja
