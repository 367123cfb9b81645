#include "grammar/grammar_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/json_grammar.h"
#include "grammar/token_vocabulary.h"

namespace pdserve::grammar {
namespace {

std::shared_ptr<const JsonGrammar> Compile(const std::string& schema) {
  auto compiled = CompileJsonSchemaText(schema);
  EXPECT_TRUE(compiled.ok()) << compiled.status().message();
  return compiled.ok() ? *compiled : nullptr;
}

// Whether the whole text is admitted and complete.
bool Admits(const std::string& schema, const std::string& text) {
  GrammarMatcher m(Compile(schema));
  return m.Advance(text) && m.IsComplete();
}

constexpr char kPerson[] = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer"},"nick":{"type":"string"},
  "tags":{"type":"array","items":{"enum":["a","ab","b"]},"minItems":1,"maxItems":2},
  "score":{"type":["number","null"]}},
  "required":["name","age"],"additionalProperties":false})";

TEST(GrammarMatcherTest, AdmitsValuesOfTheSchemaInItsOrder) {
  EXPECT_TRUE(Admits(kPerson, R"({"name":"Ada","age":36})"));
  EXPECT_TRUE(Admits(kPerson, R"({"name":"Ada","age":-3,"nick":"A"})"));
  EXPECT_TRUE(Admits(kPerson, R"({"name":"","age":0,"tags":["ab","b"],"score":null})"));
  EXPECT_TRUE(Admits(kPerson, R"({"name":"\u00e9\n\"","age":1,"score":-1.5e+3})"));
  EXPECT_TRUE(Admits(kPerson, "{\"name\":\"caf\xC3\xA9 \xF0\x9F\x98\x80\",\"age\":1}"));
}

TEST(GrammarMatcherTest, RefusesWhatTheSchemaDoesNot) {
  EXPECT_FALSE(Admits(kPerson, R"({"age":36,"name":"Ada"})"));   // out of order
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada"})"));            // age is required
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":3.5})"));  // an integer
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":01})"));
  EXPECT_TRUE(Admits(kPerson, R"({"name":"Ada","age":999999999999999})"));
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":1000000000000000})"));  // 16 digits
  EXPECT_TRUE(Admits(kPerson, R"({"name":"A","age":1,"score":1.5e-99})"));
  EXPECT_FALSE(Admits(kPerson, R"({"name":"A","age":1,"score":1.5e+100})"));
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":1,"tags":[]})"));             // minItems
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":1,"tags":["a","a","a"]})"));  // maxItems
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":1,"tags":["c"]})"));
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":1,"other":1})"));
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":1,})"));
  EXPECT_FALSE(Admits(kPerson, R"({ "name":"Ada","age":1})"));             // compact only
  EXPECT_FALSE(Admits(kPerson, "{\"name\":\"\x01\",\"age\":1}"));          // a control character
  EXPECT_FALSE(Admits(kPerson, "{\"name\":\"\xC3\",\"age\":1}"));          // a cut character
  EXPECT_FALSE(Admits(kPerson, "{\"name\":\"\xED\xA0\x80\",\"age\":1}"));  // a surrogate
  EXPECT_FALSE(Admits(kPerson, "{\"name\":\"\\ud800\",\"age\":1}"));
  EXPECT_FALSE(Admits(kPerson, R"({"name":"Ada","age":1})"
                               "x"));
}

TEST(GrammarMatcherTest, StringLengthsCountCharactersNotBytes) {
  const char* bounded = R"({"type":"string","minLength":2,"maxLength":3})";
  EXPECT_FALSE(Admits(bounded, R"("a")"));
  EXPECT_TRUE(Admits(bounded, R"("ab")"));
  EXPECT_TRUE(Admits(bounded, R"("abc")"));
  EXPECT_FALSE(Admits(bounded, R"("abcd")"));
  EXPECT_TRUE(
      Admits(bounded, "\"\xC3\xA9\xF0\x9F\x98\x80\\n\""));  // three characters in eight bytes
  EXPECT_TRUE(Admits(bounded, R"("\u00e9\"")"));
  EXPECT_FALSE(Admits(bounded, R"("\u00e9\"x\t")"));
  GrammarMatcher full(Compile(bounded));
  ASSERT_TRUE(full.Advance(R"("abc)"));
  EXPECT_FALSE(full.Advance("d"));
  EXPECT_FALSE(full.Advance("\\"));  // an escape would be a fourth character
  EXPECT_TRUE(full.Advance("\""));
}

TEST(GrammarMatcherTest, CompleteAndTerminated) {
  GrammarMatcher number(Compile(R"({"type":"number"})"));
  ASSERT_TRUE(number.Advance("12"));
  EXPECT_TRUE(number.IsComplete());
  EXPECT_FALSE(number.IsTerminated());  // more digits may come
  EXPECT_TRUE(number.Advance("5.25"));
  EXPECT_FALSE(number.Advance("."));
  GrammarMatcher object(Compile(kPerson));
  ASSERT_TRUE(object.Advance(R"({"name":"x","age":2)"));
  EXPECT_FALSE(object.IsComplete());
  ASSERT_TRUE(object.Advance("}"));
  EXPECT_TRUE(object.IsComplete());
  EXPECT_TRUE(object.IsTerminated());
  GrammarMatcher words(Compile(R"({"enum":[1,12,"x"]})"));
  ASSERT_TRUE(words.Advance("1"));
  EXPECT_TRUE(words.IsComplete());
  EXPECT_FALSE(words.IsTerminated());
  ASSERT_TRUE(words.Advance("2"));
  EXPECT_TRUE(words.IsTerminated());
}

TEST(GrammarMatcherTest, AnyOfAndRecursionAndAnyJson) {
  const char* tree = R"({"$defs":{"n":{"type":"object","properties":{
      "v":{"anyOf":[{"type":"integer"},{"type":"string"},{"type":"object","properties":{"x":{"type":"null"}}}]},
      "kids":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"]}},"$ref":"#/$defs/n"})";
  EXPECT_TRUE(Admits(tree, R"({"v":1,"kids":[{"v":"a"},{"v":{"x":null},"kids":[{"v":{}}]}]})"));
  EXPECT_FALSE(Admits(tree, R"({"v":1,"kids":[{"v":true}]})"));
  EXPECT_TRUE(Admits(kAnyJsonObjectSchema, R"({"a":[1,{"b":null}],"c":"d","e":-0.5,"f":true})"));
  EXPECT_TRUE(Admits(kAnyJsonObjectSchema, "{}"));
  EXPECT_FALSE(Admits(kAnyJsonObjectSchema, "[1]"));  // json_object: an object
  EXPECT_FALSE(Admits(kAnyJsonObjectSchema, R"({"a":})"));
  EXPECT_TRUE(
      Admits(R"({"type":"object","additionalProperties":{"type":"integer"}})", R"({"a":1,"b":2})"));
  EXPECT_FALSE(
      Admits(R"({"type":"object","additionalProperties":{"type":"integer"}})", R"({"a":"1"})"));
}

TEST(GrammarMatcherTest, AValueBetweenFixedTexts) {
  auto call = CompileJsonSchemaText(
      R"({"type":"object","properties":{"name":{"const":"f"}},"required":["name"]})",
      "<tool_call>\n", "\n</tool_call>");
  ASSERT_TRUE(call.ok()) << call.status().message();
  GrammarMatcher m(*call);
  ASSERT_TRUE(m.Advance("<tool_call>\n{\"name\":\"f\"}"));
  EXPECT_FALSE(m.IsComplete());
  ASSERT_TRUE(m.Advance("\n</tool_call>"));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(GrammarMatcher(*call).Advance("{\"name\""));  // the prefix first
  EXPECT_FALSE(GrammarMatcher(*call).Advance("<tool_call>{"));
  auto number = CompileJsonSchemaText(R"({"type":"integer"})", "n=");
  ASSERT_TRUE(number.ok());
  GrammarMatcher n(*number);
  ASSERT_TRUE(n.Advance("n=12"));
  EXPECT_TRUE(n.IsComplete());
  EXPECT_FALSE(n.IsTerminated());  // more digits may come
}

TEST(GrammarMatcherTest, AFailedAdvanceLeavesTheStateAsItWas) {
  GrammarMatcher m(Compile(kPerson));
  ASSERT_TRUE(m.Advance(R"({"name":"A)"));
  const std::string before = m.StateKey();
  EXPECT_FALSE(m.Advance("\"x"));  // the quote is fine, then no key starts with x
  EXPECT_EQ(m.StateKey(), before);
  EXPECT_TRUE(m.Advance(R"(","age":5})"));
  EXPECT_TRUE(m.IsTerminated());
}

// The mask's walk against feeding every token's bytes on its own, along random paths through
// the grammar: they must agree at every state.
TEST(GrammarMatcherTest, FillMaskAgreesWithFeedingEachTokenAlone) {
  std::vector<std::string> tokens = {
      "{",    "}",        "\"",   "\":",  "{\"",  "\"name",   "name", "age", "\":\"", "\",\"",
      ",",    "\"age\":", "1",    "12",   "0",    "-",        ".",    "5e",  "[",     "]",
      "[\"",  "\"]",      "a",    "ab",   "b",    "\",",      "null", "nu",  "ll",    "}}",
      "tags", "score",    "nick", "\\",   "u",    "00e9",     " ",    "x",   "\xC3",  "\xA9",
      "\"}",  "1}",       "\":[", "],\"", "\"]}", "\":null}", "\":-", ""};
  auto vocab = std::make_shared<TokenVocabulary>(tokens);
  auto grammar = Compile(kPerson);
  std::mt19937 rng(7);
  for (int walk = 0; walk < 200; ++walk) {
    GrammarMatcher m(grammar);
    for (int step = 0; step < 40 && !m.IsTerminated(); ++step) {
      TokenMask mask;
      m.FillMask(*vocab, &mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->size(); ++id) {
        GrammarMatcher alone = m;
        const bool admits = !tokens[static_cast<size_t>(id)].empty() &&
                            alone.Advance(tokens[static_cast<size_t>(id)]);
        ASSERT_EQ(mask.allowed(id), admits) << "token '" << tokens[static_cast<size_t>(id)]
                                            << "' at walk " << walk << " step " << step;
        if (admits) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      const int32_t pick =
          allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      ASSERT_TRUE(m.Advance(tokens[static_cast<size_t>(pick)]));
    }
  }
}

}  // namespace
}  // namespace pdserve::grammar
