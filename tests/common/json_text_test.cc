#include "common/json_text.h"

#include <gtest/gtest.h>

#include <string>

namespace pdserve {
namespace {

using nlohmann::json;

// Arrays nested `depth` deep around 1, as text.
std::string Nested(int depth) { return std::string(depth, '[') + "1" + std::string(depth, ']'); }

TEST(JsonText, DescribesScalarsAsWrittenAndContainersByKind) {
  EXPECT_EQ(DescribeJson(json(5)), "5");
  EXPECT_EQ(DescribeJson(json(2.5)), "2.5");
  EXPECT_EQ(DescribeJson(json(true)), "true");
  EXPECT_EQ(DescribeJson(json(nullptr)), "null");
  EXPECT_EQ(DescribeJson(json("text")), "\"text\"");
  EXPECT_EQ(DescribeJson(json::array({1, 2, 3})), "an array of 3");
  EXPECT_EQ(DescribeJson(json::array()), "an empty array");
  EXPECT_EQ(DescribeJson(json::object({{"a", 1}})), "an object");
}

TEST(JsonText, CutsLongStringsOnACharacterBoundary) {
  const std::string s = std::string(63, 'x') + "ção" + std::string(100, 'y');
  const std::string d = DescribeJson(json(s));
  EXPECT_EQ(d, "\"" + std::string(63, 'x') + "\"...");  // 'ç' would straddle byte 64
}

TEST(JsonText, DeepNestingIsDescribedWithoutRecursing) {
  // 200,000 levels: dump() of this overflows an 8 MB stack; parsing and destroying do not.
  const json deep = json::parse(Nested(200000));
  EXPECT_EQ(DescribeJson(deep), "an array of 1");
  EXPECT_EQ(JsonNestingDepth(Nested(200000)), 200000);
}

TEST(JsonText, DumpReplacesInvalidUtf8InsteadOfThrowing) {
  const json j = {{"error", std::string("No route for GET /\xff\xfe")}};
  EXPECT_THROW((void)j.dump(), json::type_error);
  EXPECT_EQ(DumpJson(j), "{\"error\":\"No route for GET /\xEF\xBF\xBD\xEF\xBF\xBD\"}");
  EXPECT_EQ(DescribeJson(json(std::string("a\xc3("))), "\"a\xEF\xBF\xBD(\"");
}

TEST(JsonText, NestingDepthIgnoresBracketsInStrings) {
  EXPECT_EQ(JsonNestingDepth("1"), 0);
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": []}]})"), 4);
  EXPECT_EQ(JsonNestingDepth(R"(["[[[[", "\"[[", {}])"), 2);
  EXPECT_EQ(JsonNestingDepth("]]]"), 0);  // invalid text: no negative depth
}

}  // namespace
}  // namespace pdserve
