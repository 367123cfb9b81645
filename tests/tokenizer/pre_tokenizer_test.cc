// Tests of tokenizer.json's pre-tokenizer built from JSON (tokenizer/pre_tokenizer.h): literal
// Split patterns, Hugging Face's behaviors, Metaspace (SentencePiece-style files), \s as Unicode's
// White_Space, and a Split behavior of the wrong JSON type is a Status, not an exception.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pdserve::tokenizer {
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

std::vector<std::string> Pieces(const nlohmann::json& config, std::string_view text,
                                bool at_origin = true) {
  auto made = PreTokenizer::FromJson(config);
  EXPECT_TRUE(made.ok()) << made.status().ToString();
  std::vector<std::string> pieces;
  if (made.ok()) {
    EXPECT_TRUE(made->Split(text, pieces, at_origin).ok());
  }
  return pieces;
}

using PieceList = std::vector<std::string>;

// As Hugging Face: a match joins the part after it only when that part is not a match.
TEST(PreTokenizerTest, MergedWithNextLeavesRunsOfMatchesApart) {
  const nlohmann::json split = {
      {"type", "Split"}, {"pattern", {{"String", "▁"}}}, {"behavior", "MergedWithNext"}};
  EXPECT_EQ(Pieces(split, "▁Hello▁▁world▁"), (PieceList{"▁Hello", "▁", "▁world", "▁"}));
  EXPECT_EQ(Pieces(split, "a▁b"), (PieceList{"a", "▁b"}));
  const nlohmann::json previous = {
      {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "MergedWithPrevious"}};
  EXPECT_EQ(Pieces(previous, "-a--b-"), (PieceList{"-", "a-", "-", "b-"}));
}

TEST(PreTokenizerTest, MetaspaceReplacesSpacesAndPrependsPerScheme) {
  auto metaspace = [](const char* scheme, bool split) {
    return nlohmann::json{
        {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", scheme}, {"split", split}};
  };
  EXPECT_EQ(Pieces(metaspace("always", true), "Hello  world"),
            (PieceList{"▁Hello", "▁", "▁world"}));
  EXPECT_EQ(Pieces(metaspace("always", false), "Hello  world"), (PieceList{"▁Hello▁▁world"}));
  EXPECT_EQ(Pieces(metaspace("always", false), " x"), (PieceList{"▁x"}));  // already starts with ▁
  EXPECT_EQ(Pieces(metaspace("never", false), "Hello world"), (PieceList{"Hello▁world"}));
  // "first": only at the start of the input, not after an added token.
  EXPECT_EQ(Pieces(metaspace("first", false), "Hi you", true), (PieceList{"▁Hi▁you"}));
  EXPECT_EQ(Pieces(metaspace("first", false), "Hi you", false), (PieceList{"Hi▁you"}));
  EXPECT_EQ(Pieces(metaspace("always", false), "Hi", false), (PieceList{"▁Hi"}));
  // The older form: add_prefix_space (true by default) means "always", false means "never".
  EXPECT_EQ(Pieces({{"type", "Metaspace"}, {"replacement", "▁"}}, "a b", false),
            (PieceList{"▁a", "▁b"}));
  EXPECT_EQ(
      Pieces({{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", false}}, "a b"),
      (PieceList{"a", "▁b"}));
  // In a Sequence after a Split, "first" still means the input's start only.
  const nlohmann::json sequence = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"String", "|"}}}, {"behavior", "Removed"}},
        metaspace("first", false)}}};
  EXPECT_EQ(Pieces(sequence, "a|b"), (PieceList{"▁a", "b"}));
  EXPECT_EQ(Pieces(sequence, "|a|b"), (PieceList{"a", "b"}));

  for (const nlohmann::json& bad :
       {nlohmann::json{{"type", "Metaspace"}, {"replacement", "__"}},
        nlohmann::json{{"type", "Metaspace"}, {"replacement", ""}},
        nlohmann::json{{"type", "Metaspace"}},
        nlohmann::json{
            {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "sometimes"}},
        nlohmann::json{{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", 1}}}) {
    auto made = PreTokenizer::FromJson(bad);
    EXPECT_FALSE(made.ok()) << bad.dump();
    EXPECT_EQ(made.status().code(), StatusCode::kInvalidArgument) << made.status().ToString();
  }
}

// U+180E MONGOLIAN VOWEL SEPARATOR is not White_Space (since Unicode 6.3): Hugging Face's \s
// does not match it, PCRE2's does unless the pattern is rewritten.
TEST(PreTokenizerTest, WhiteSpaceClassIsUnicodeWhiteSpace) {
  auto regex = Regex::Compile(R"(\s+|[\s]|\S+|[^\s\p{L}])", /*literal=*/false);
  ASSERT_TRUE(regex.ok()) << regex.status().ToString();
  std::vector<std::pair<size_t, size_t>> matches;
  ASSERT_TRUE((*regex)->FindAll("a \u180e\u3000b", matches).ok());
  // "a", " ", U+180E (3 bytes, \S), U+3000 (3 bytes, \s), "b".
  EXPECT_EQ(matches,
            (std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 2}, {2, 5}, {5, 8}, {8, 9}}));
  auto classes = Regex::Compile(R"([\]\s]+|[[:alpha:]\s]+|\Q\s\E)", /*literal=*/false);
  ASSERT_TRUE(classes.ok()) << classes.status().ToString();
  matches.clear();
  ASSERT_TRUE((*classes)->FindAll("] ]x y\\s", matches).ok());
  EXPECT_EQ(matches, (std::vector<std::pair<size_t, size_t>>{{0, 3}, {3, 6}, {6, 8}}));
}

}  // namespace
}  // namespace pdserve::tokenizer
