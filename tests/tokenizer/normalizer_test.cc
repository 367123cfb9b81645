// Tests for tokenizer/normalizer.h: each normalizer type as Hugging Face tokenizers applies it
// (SentencePiece-style files: Prepend "▁" then Replace " " with "▁"), and what is refused.
#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace pdserve::tokenizer {
namespace {

using json = nlohmann::json;

std::string Apply(const json& config, std::string_view text) {
  auto normalizer = Normalizer::FromJson(config);
  EXPECT_TRUE(normalizer.ok()) << normalizer.status().ToString();
  if (!normalizer.ok()) return "<not built>";
  auto out = normalizer->Apply(text);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : "<failed>";
}

json Prepend(const std::string& text) { return {{"type", "Prepend"}, {"prepend", text}}; }
json Replace(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}

TEST(NormalizerTest, PrependPutsTextInFrontOfNonEmptyInput) {
  EXPECT_EQ(Apply(Prepend("▁"), "Hello"), "▁Hello");
  EXPECT_EQ(Apply(Prepend("▁"), " Hello"), "▁ Hello");
  EXPECT_EQ(Apply(Prepend("▁"), "▁Hello"), "▁▁Hello");  // no check for one already there
  EXPECT_EQ(Apply(Prepend("▁"), ""), "");               // empty input stays empty
}

TEST(NormalizerTest, ReplaceChangesEveryOccurrence) {
  EXPECT_EQ(Apply(Replace(" ", "▁"), " a  b "), "▁a▁▁b▁");
  EXPECT_EQ(Apply(Replace("ab", "x"), "abababa"), "xxxa");  // left to right, no overlap
  EXPECT_EQ(Apply(Replace("a", "aa"), "aba"), "aabaa");     // the replacement is not rescanned
  EXPECT_EQ(Apply(Replace("é", ""), "café é"), "caf ");     // whole characters
  EXPECT_EQ(Apply(Replace(" ", "▁"), "no spaces"), "no▁spaces");
}

TEST(NormalizerTest, SequenceAppliesStepsInOrder) {
  // Llama-2 and Mistral's normalizer.
  const json llama2 = {{"type", "Sequence"}, {"normalizers", {Prepend("▁"), Replace(" ", "▁")}}};
  EXPECT_EQ(Apply(llama2, "Hello world"), "▁Hello▁world");
  EXPECT_EQ(Apply(llama2, " x"), "▁▁x");
  EXPECT_EQ(Apply(llama2, ""), "");
  const json reversed = {{"type", "Sequence"}, {"normalizers", {Replace(" ", "▁"), Prepend(" ")}}};
  EXPECT_EQ(Apply(reversed, "a b"), " a▁b");
  // NFC composes "e" and a combining acute accent.
  const json nfc = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, Replace("é", "E")}}};
  EXPECT_EQ(Apply(nfc, "cafe\xcc\x81"), "cafE");
  auto empty = Normalizer::FromJson({{"type", "Sequence"}, {"normalizers", json::array()}});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->is_identity());
  auto null = Normalizer::FromJson(nullptr);
  ASSERT_TRUE(null.ok());
  EXPECT_TRUE(null->is_identity());
  EXPECT_FALSE(Normalizer::FromJson(Prepend("▁"))->is_identity());
}

TEST(NormalizerTest, UnsupportedAndMalformedConfigsAreErrors) {
  auto lower = Normalizer::FromJson({{"type", "Lowercase"}});
  ASSERT_FALSE(lower.ok());
  EXPECT_EQ(lower.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(lower.status().message().find("Lowercase"), std::string::npos);

  auto regex =
      Normalizer::FromJson({{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "▁"}});
  ASSERT_FALSE(regex.ok());
  EXPECT_EQ(regex.status().code(), StatusCode::kUnimplemented);

  // Fields of the wrong JSON type are a Status, not an exception.
  for (const json& bad :
       {json{{"type", "Prepend"}}, json{{"type", "Prepend"}, {"prepend", 3}},
        json{{"type", "Replace"}, {"pattern", {{"String", ""}}}, {"content", "x"}},
        json{{"type", "Replace"}, {"pattern", "x"}, {"content", "y"}},
        json{{"type", "Replace"}, {"pattern", {{"String", "x"}}}},
        json{{"type", "Sequence"}, {"normalizers", "NFC"}}, json::array({1, 2}), json(7)}) {
    auto made = Normalizer::FromJson(bad);
    EXPECT_FALSE(made.ok()) << bad.dump();
  }
}

}  // namespace
}  // namespace pdserve::tokenizer
