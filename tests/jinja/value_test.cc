// Tests for jinja/value.h: values from JSON (key order kept), Dict, argument binding.
#include "jinja/value.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pdserve::jinja {
namespace {

TEST(ValueTest, FromOrderedJsonKeepsKeyOrder) {
  auto json = nlohmann::ordered_json::parse(R"({"z": 1, "a": [true, null, 2.5, "s"], "m": {}})");
  Value v = Value::FromJson(json);
  ASSERT_TRUE(v.is_dict());
  const auto& entries = v.dict().entries();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].first, "z");
  EXPECT_EQ(entries[1].first, "a");
  const Sequence& list = entries[1].second.sequence();
  EXPECT_EQ(list.kind, SequenceKind::kList);
  EXPECT_TRUE(list.items[0].is_bool());
  EXPECT_TRUE(list.items[1].is_none());
  EXPECT_DOUBLE_EQ(list.items[2].float_value(), 2.5);
  EXPECT_EQ(list.items[3].string(), "s");
  EXPECT_TRUE(entries[2].second.dict().empty());
}

TEST(ValueTest, DictReplacesInPlaceAndFindsInLargeDicts) {
  Dict d;
  for (int i = 0; i < 20; ++i) d.Set(std::string("k").append(std::to_string(i)), Value::Int(i));
  d.Set("k3", Value::String("three"));
  EXPECT_EQ(d.size(), 20u);
  EXPECT_EQ(d.entries()[3].second.string(), "three");
  ASSERT_NE(d.Find("k19"), nullptr);
  EXPECT_EQ(d.Find("k19")->int_value(), 19);
  EXPECT_EQ(d.Find("nope"), nullptr);
}

TEST(ValueTest, BoolIsAnIntegerAsInPython) {
  Value t = Value::Bool(true);
  EXPECT_TRUE(t.is_integral());
  EXPECT_FALSE(t.is_int());
  EXPECT_EQ(t.int_value(), 1);
  EXPECT_EQ(t.TypeName(), "bool");
  EXPECT_EQ(Value::Iterator({}).TypeName(), "generator");
  EXPECT_TRUE(Value().is_undefined());
  EXPECT_EQ(Value::Undefined("'x' is undefined").string(), "'x' is undefined");
}

TEST(ValueTest, BindArgumentsLikePython) {
  Arguments args{{Value::Int(1)}, {{"c", Value::Int(3)}}};
  auto bound = BindArguments("f", args, {"a", "b", "c"});
  ASSERT_TRUE(bound.ok());
  EXPECT_EQ((*bound)[0]->int_value(), 1);
  EXPECT_FALSE((*bound)[1].has_value());
  EXPECT_EQ((*bound)[2]->int_value(), 3);
  EXPECT_FALSE(BindArguments("f", Arguments{{Value::Int(1), Value::Int(2)}, {}}, {"a"}).ok());
  EXPECT_FALSE(BindArguments("f", Arguments{{}, {{"zz", Value::None()}}}, {"a"}).ok());
  EXPECT_FALSE(BindArguments("f", Arguments{{Value::Int(1)}, {{"a", Value::None()}}}, {"a"}).ok());
}

}  // namespace
}  // namespace pdserve::jinja
