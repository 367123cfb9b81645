// Tests for jinja/sequence_filters.h through the registry (jinja/filters.h): map, select and the
// like give one-shot iterators as Jinja2's generators; sort, unique, min and max ignore case.
#include "jinja/sequence_filters.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "jinja/filters.h"
#include "jinja/value_text.h"
#include "tests/jinja/filter_calls.h"

namespace pdserve::jinja {
namespace {

using testing::Apply;
using testing::Json;
using testing::kMessages;

TEST(SequenceFiltersTest, ThroughTheRegistry) {
  Value messages = Json(kMessages);
  EXPECT_EQ(Apply("length", messages), "2");
  auto roles = ApplyFilter("map", messages, Arguments{{}, {{"attribute", Value::String("role")}}});
  ASSERT_TRUE(roles.ok());
  EXPECT_EQ(roles->sequence().kind, SequenceKind::kIterator);  // a generator, as in Jinja2
  EXPECT_EQ(Apply("join", *roles, {Value::String(",")}), "system,user");
  EXPECT_EQ(Apply("list", *ApplyFilter("selectattr", messages,
                                       Arguments{{Value::String("role"), Value::String("equalto"),
                                                  Value::String("user")},
                                                 {}})),
            "[{'role': 'user', 'content': 'u'}]");
  EXPECT_EQ(Apply("first", Value::List({})), "");
  EXPECT_EQ(Apply("last", Json("[1, 2]")), "2");
  EXPECT_EQ(Apply("sort", Json(R"(["b", "A", "c"])")), "['A', 'b', 'c']");
  EXPECT_EQ(Apply("list", *ApplyFilter("unique", Json(R"(["a", "A", 1, 1.0])"), {})), "['a', 1]");
  EXPECT_EQ(Apply("sum", Json("[1, 2.5]")), "3.5");
  EXPECT_EQ(Apply("max", Json("[3, 9, 1]")), "9");
  EXPECT_EQ(Apply("length", Value::Iterator({})), "ERROR: object of type 'generator' has no len()");
}

TEST(SequenceFiltersTest, CalledDirectly) {
  Value messages = Json(kMessages);
  auto users = sequence_filters::SelectAttr(
      messages, Arguments{{Value::String("role"), Value::String("eq"), Value::String("user")}, {}});
  ASSERT_TRUE(users.ok());
  EXPECT_TRUE(users->is_sequence());
  EXPECT_EQ(Str(*sequence_filters::ListFilter(*users, {})), "[{'role': 'user', 'content': 'u'}]");
  EXPECT_EQ(Str(*sequence_filters::DictSort(Json(R"({"b": 1, "A": 2})"), {})),
            "[('A', 2), ('b', 1)]");
  EXPECT_FALSE(sequence_filters::Last(Value::Iterator({}), {}).ok());  // not reversible
}

}  // namespace
}  // namespace pdserve::jinja
