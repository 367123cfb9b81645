// Tests of tokenizer.json's pre-tokenizer built from JSON (tokenizer/pre_tokenizer.h): literal
// Split patterns, and a Split behavior of the wrong JSON type is a Status, not an exception.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pdserve::model {
namespace {

nlohmann::json SplitOnSpace(const nlohmann::json& behavior) {
  nlohmann::json split = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"invert", false}};
  if (!behavior.is_null()) split["behavior"] = behavior;
  return {{"type", "Sequence"}, {"pretokenizers", {split}}};
}

// Found writing the test below: PCRE2 refused every {"String": ...} pattern (PCRE2_LITERAL with
// PCRE2_UCP), so no tokenizer.json with a literal Split loaded.
TEST(PreTokenizerTest, SplitBehaviorsNameHowPiecesAreCut) {
  auto removed = PreTokenizer::FromJson(SplitOnSpace("Removed"));
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  std::vector<std::string> pieces;
  ASSERT_TRUE(removed->Split("a b  c", pieces).ok());
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "b", "c"}));
  auto isolated = PreTokenizer::FromJson(SplitOnSpace(nullptr));  // the default
  ASSERT_TRUE(isolated.ok()) << isolated.status().ToString();
  pieces.clear();
  ASSERT_TRUE(isolated->Split("a b", pieces).ok());
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", " ", "b"}));
  auto literal = Regex::Compile("(.)", /*literal=*/true);  // no regex syntax in a literal
  ASSERT_TRUE(literal.ok()) << literal.status().ToString();
  std::vector<std::pair<size_t, size_t>> matches;
  ASSERT_TRUE((*literal)->FindAll("a(.)b(c)", matches).ok());
  EXPECT_EQ(matches, (std::vector<std::pair<size_t, size_t>>{{1, 4}}));
}

// Found by tests/fuzz/pre_tokenizer_fuzz.cc (its seed crash-e0e24984...): a behavior that was
// not a string threw nlohmann's type_error out of FromJson.
TEST(PreTokenizerTest, ABehaviorThatIsNotAStringIsAnError) {
  for (const nlohmann::json& behavior :
       {nlohmann::json(false), nlohmann::json(3), nlohmann::json::array({"Removed"})}) {
    auto made = PreTokenizer::FromJson(SplitOnSpace(behavior));
    ASSERT_FALSE(made.ok()) << behavior.dump();
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(made.status().message().find("Split behavior must be a string"), std::string::npos)
        << made.status().ToString();
  }
  auto unknown = PreTokenizer::FromJson(SplitOnSpace("Sideways"));
  EXPECT_NE(unknown.status().message().find("\"Sideways\" is unknown"), std::string::npos)
      << unknown.status().ToString();
}

}  // namespace
}  // namespace pdserve::model
