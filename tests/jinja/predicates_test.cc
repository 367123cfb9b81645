// Tests for jinja/predicates.h: Jinja2's tests, with Python's notion of types (bool is a
// number, Undefined is a sequence and iterable).
#include "jinja/predicates.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pdserve::jinja {
namespace {

bool Is(std::string_view name, const Value& v, std::vector<Value> args = {}) {
  auto result = ApplyTest(name, v, Arguments{std::move(args), {}});
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() && *result;
}

TEST(PredicatesTest, Types) {
  EXPECT_TRUE(Is("defined", Value::None()));
  EXPECT_TRUE(Is("undefined", Value()));
  EXPECT_TRUE(Is("none", Value::None()));
  EXPECT_TRUE(Is("string", Value::String("")));
  EXPECT_TRUE(Is("number", Value::Bool(true)));
  EXPECT_FALSE(Is("integer", Value::Bool(true)));
  EXPECT_TRUE(Is("integer", Value::Int(1)));
  EXPECT_TRUE(Is("float", Value::Float(1)));
  EXPECT_TRUE(Is("boolean", Value::Bool(false)));
  EXPECT_FALSE(Is("true", Value::Int(1)));
  EXPECT_TRUE(Is("mapping", Value::FromJson(nlohmann::ordered_json::object())));
  EXPECT_TRUE(Is("sequence", Value::String("ab")));
  EXPECT_TRUE(Is("sequence", Value()));
  EXPECT_FALSE(Is("sequence", Value::Iterator({})));
  EXPECT_TRUE(Is("iterable", Value::Iterator({})));
  EXPECT_FALSE(Is("iterable", Value::Int(1)));
}

TEST(PredicatesTest, ComparisonsAndArithmetic) {
  EXPECT_TRUE(Is("odd", Value::Int(3)));
  EXPECT_TRUE(Is("even", Value::Int(-4)));
  EXPECT_TRUE(Is("divisibleby", Value::Int(9), {Value::Int(3)}));
  EXPECT_TRUE(Is("equalto", Value::Int(1), {Value::Float(1.0)}));
  EXPECT_TRUE(Is("==", Value::String("a"), {Value::String("a")}));
  EXPECT_TRUE(Is("ne", Value::String("a"), {Value::String("b")}));
  EXPECT_TRUE(Is("gt", Value::Int(2), {Value::Int(1)}));
  EXPECT_TRUE(Is("le", Value::Int(2), {Value::Int(2)}));
  EXPECT_TRUE(Is("in", Value::String("b"), {Value::String("abc")}));
  EXPECT_TRUE(Is("sameas", Value::None(), {Value::None()}));
  EXPECT_TRUE(Is("lower", Value::String("abc")));
  EXPECT_TRUE(Is("upper", Value::String("ABC")));
  EXPECT_TRUE(Is("filter", Value::String("trim")));
  EXPECT_TRUE(Is("test", Value::String("odd")));
}

TEST(PredicatesTest, UnknownTestsAndBadArguments) {
  EXPECT_EQ(FindTest("nosuch"), nullptr);
  EXPECT_FALSE(ApplyTest("nosuch", Value(), {}).ok());
  EXPECT_FALSE(ApplyTest("divisibleby", Value::Int(3), {}).ok());
  EXPECT_FALSE(ApplyTest("odd", Value::String("a"), {}).ok());
}

}  // namespace
}  // namespace pdserve::jinja
