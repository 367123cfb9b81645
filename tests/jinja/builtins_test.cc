// Tests for jinja/builtins.h: range, namespace, dict, raise_exception and strftime_now.
#include "jinja/builtins.h"

#include <gtest/gtest.h>

#include "jinja/value_text.h"

namespace pdserve::jinja {
namespace {

Result<Value> CallGlobal(std::string_view name, Arguments args) {
  static const Dict globals = DefaultGlobals();
  const Value* f = globals.Find(name);
  if (f == nullptr) return NotFound(std::string(name));
  return f->callable().function(args);
}

TEST(BuiltinsTest, Range) {
  EXPECT_EQ(Str(*CallGlobal("range", {{Value::Int(3)}, {}})), "[0, 1, 2]");
  EXPECT_EQ(Str(*CallGlobal("range", {{Value::Int(5), Value::Int(0), Value::Int(-2)}, {}})),
            "[5, 3, 1]");
  EXPECT_FALSE(CallGlobal("range", {{Value::Int(0), Value::Int(1), Value::Int(0)}, {}}).ok());
  EXPECT_FALSE(CallGlobal("range", {{Value::Int(200000)}, {}}).ok());  // the sandbox's limit
}

TEST(BuiltinsTest, NamespaceAndDict) {
  auto ns = CallGlobal("namespace", {{}, {{"a", Value::Int(1)}}});
  ASSERT_TRUE(ns.ok());
  ASSERT_TRUE(ns->is_namespace());
  ns->namespace_attributes().Set("a", Value::Int(2));
  EXPECT_EQ(Str(*ns), "<Namespace {'a': 2}>");
  EXPECT_EQ(Str(*CallGlobal("dict", {{}, {{"k", Value::String("v")}}})), "{'k': 'v'}");
}

TEST(BuiltinsTest, RaiseExceptionCarriesTheMessage) {
  auto raised = RaiseExceptionFunction()(Arguments{{Value::String("roles must alternate")}, {}});
  ASSERT_FALSE(raised.ok());
  EXPECT_EQ(raised.status().message(), "roles must alternate");
}

TEST(BuiltinsTest, StrftimeNowFormatsTheLocalTime) {
  auto year = StrftimeNowFunction()(Arguments{{Value::String("%Y")}, {}});
  ASSERT_TRUE(year.ok());
  EXPECT_EQ(year->string().size(), 4u);
  EXPECT_EQ(StrftimeNowFunction()(Arguments{{Value::String("plain")}, {}})->string(), "plain");
}

}  // namespace
}  // namespace pdserve::jinja
