#include "grammar/json_grammar.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace pdserve::grammar {
namespace {

std::string CompileError(const std::string& schema) {
  auto compiled = CompileJsonSchemaText(schema);
  return compiled.ok() ? "" : compiled.status().message();
}

TEST(JsonGrammarTest, CompilesTheStrictModeSubset) {
  const char* schema = R"({
    "type": "object",
    "title": "a person",
    "properties": {
      "name": {"type": "string", "description": "full name"},
      "age": {"type": "integer"},
      "height": {"type": ["number", "null"]},
      "role": {"enum": ["admin", "user"]},
      "kind": {"const": "person"},
      "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
      "address": {"$ref": "#/$defs/address"},
      "ok": {"type": "boolean"},
      "nothing": {"type": "null"},
      "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    },
    "required": ["name", "age"],
    "additionalProperties": false,
    "$defs": {"address": {"type": "object", "properties": {"city": {"type": "string"}}}}
  })";
  auto compiled = CompileJsonSchemaText(schema);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const JsonGrammar& g = **compiled;
  const Node& root = g.node(g.root());
  ASSERT_EQ(root.kind, NodeKind::kObject);
  ASSERT_EQ(root.properties.size(), 10u);
  EXPECT_EQ(root.properties[0].key, "\"name\":");
  EXPECT_TRUE(root.properties[0].required);
  EXPECT_FALSE(root.properties[2].required);
  EXPECT_EQ(root.first_required_from[0], 0);
  EXPECT_EQ(root.first_required_from[2], 10);  // none after age
}

TEST(JsonGrammarTest, RefusesKeywordsItCannotEnforceNamingThemAndWhere) {
  EXPECT_EQ(CompileError(
                R"({"type":"object","properties":{"zip":{"type":"string","pattern":"^[0-9]+$"}}})"),
            "unsupported JSON Schema keyword 'pattern' at /properties/zip");
  EXPECT_EQ(CompileError(R"({"type":"integer","minimum":3})"),
            "unsupported JSON Schema keyword 'minimum' at /");
  EXPECT_EQ(CompileError(R"({"oneOf":[{"type":"string"}]})"),
            "unsupported JSON Schema keyword 'oneOf' at /");
  EXPECT_EQ(CompileError(R"({"type":"string","format":"date-time"})"),
            "unsupported JSON Schema keyword 'format' at /");
}

TEST(JsonGrammarTest, RefusesSchemasThatAdmitNothingOrLoop) {
  EXPECT_NE(CompileError("false"), "");
  EXPECT_NE(CompileError(R"({"enum":[]})"), "");
  EXPECT_NE(CompileError(R"({"type":"array","minItems":3,"maxItems":2})"), "");
  EXPECT_EQ(CompileError(R"({"type":"string","minLength":3,"maxLength":2})"),
            "'maxLength' at / is below 'minLength'");
  EXPECT_NE(CompileError(R"({"type":"string","maxLength":-1})"), "");
  EXPECT_NE(CompileError(R"({"type":"wood"})"), "");
  EXPECT_NE(CompileError(R"({"$ref":"#"})"), "");  // itself before any byte
  EXPECT_NE(
      CompileError(
          R"({"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/a"},{"type":"null"}]}},"$ref":"#/$defs/a"})"),
      "");
  EXPECT_NE(CompileError(R"({"$ref":"#/$defs/missing"})"), "");
  EXPECT_NE(CompileError(R"({"$ref":"https://example.com/schema.json"})"), "");
  EXPECT_NE(CompileError(R"({"type":"string","anyOf":[{"type":"string"}]})"), "");
  EXPECT_NE(CompileError(R"({"allOf":[{"type":"string"},{"type":"null"}]})"), "");
  EXPECT_NE(CompileError(R"({"type":"array","items":[{"type":"string"}]})"), "");
  EXPECT_NE(CompileError("not json"), "");
  EXPECT_NE(CompileError("[1]"), "");
}

TEST(JsonGrammarTest, RecursiveRefsCompileToACycleThroughAValue) {
  const char* tree = R"({
    "$defs": {"node": {"type": "object", "properties": {
      "value": {"type": "integer"},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value", "children"], "additionalProperties": false}},
    "$ref": "#/$defs/node"})";
  EXPECT_EQ(CompileError(tree), "");
}

TEST(JsonGrammarTest, NestingAndSizeAreBounded) {
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += R"({"type":"array","items":)";
  deep += R"({"type":"string"})";
  for (int i = 0; i < 70; ++i) deep += "}";
  EXPECT_NE(CompileError(deep).find("nests deeper"), std::string::npos);
  nlohmann::ordered_json wide = {{"type", "object"}, {"properties", nlohmann::json::object()}};
  for (int i = 0; i < kMaxGrammarNodes + 1; ++i) {
    wide["properties"]["p" + std::to_string(i)] = {{"type", "array"},
                                                   {"items", {{"type", "string"}}}};
  }
  auto compiled = CompileJsonSchema(wide);
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("grammar nodes"), std::string::npos);
}

}  // namespace
}  // namespace pdserve::grammar
