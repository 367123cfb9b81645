// Tests for tokenizer/decoder.h: each decoder step as Hugging Face tokenizers applies it to a
// list of token spellings (the expected strings are what its decode gives), streaming token by
// token equal to decoding all at once, and the chains that are refused.
#include "tokenizer/decoder.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/utf8.h"

namespace pdserve::tokenizer {
namespace {

using json = nlohmann::json;

const json kReplaceSpace = {{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}};
const json kByteFallback = {{"type", "ByteFallback"}};
const json kFuse = {{"type", "Fuse"}};
const json kStripOne = {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}};

json Sequence(std::vector<json> steps) { return {{"type", "Sequence"}, {"decoders", steps}}; }
// Llama-2's, Mistral's and TinyLlama's decoder; Gemma's lacks the Strip.
const json kLlama2 = Sequence({kReplaceSpace, kByteFallback, kFuse, kStripOne});
const json kGemma = Sequence({kReplaceSpace, kByteFallback, kFuse});

Decoder Make(const json& config, bool byte_level_default = false) {
  auto decoder = Decoder::FromJson(config, byte_level_default);
  EXPECT_TRUE(decoder.ok()) << decoder.status().ToString();
  return decoder.ok() ? std::move(decoder).value() : Decoder();
}

// Decodes `tokens` at once, and token by token, and checks the two agree and each streamed
// piece is whole UTF-8.
std::string Decode(const Decoder& decoder, const std::vector<std::string>& tokens) {
  DecodeStream all(decoder);
  std::string text;
  for (const std::string& token : tokens) all.Add(token, text);
  all.Finish(text);
  DecodeStream stream(decoder);
  std::string streamed;
  for (const std::string& token : tokens) {
    std::string piece;
    stream.Add(token, piece);
    EXPECT_EQ(FindInvalidUtf8(piece), std::nullopt) << "a piece splits a character";
    streamed += piece;
  }
  stream.Finish(streamed);
  EXPECT_EQ(streamed, text);
  return text;
}

TEST(DecoderTest, SentencePieceChainTurnsMetaspaceIntoSpacesAndStripsTheFirst) {
  Decoder llama2 = Make(kLlama2);
  EXPECT_EQ(Decode(llama2, {"▁Hello", "▁world"}), "Hello world");
  EXPECT_EQ(Decode(llama2, {"<s>", "▁Hello"}), "<s> Hello");  // '<' is not a space: no strip
  EXPECT_EQ(Decode(llama2, {"▁▁", "▁Hello"}), "  Hello");     // one space stripped, not two
  EXPECT_EQ(Decode(llama2, {"<0x20>", "▁Hello"}), " Hello");  // a space from a byte counts too
  EXPECT_EQ(Decode(llama2, {"▁"}), "");
  EXPECT_EQ(Decode(llama2, {}), "");
  Decoder gemma = Make(kGemma);
  EXPECT_EQ(Decode(gemma, {"▁▁", "Hello", "▁world"}), "  Hello world");
}

TEST(DecoderTest, ByteFallbackJoinsByteRunsIntoUtf8) {
  Decoder gemma = Make(kGemma);
  EXPECT_EQ(Decode(gemma, {"<0xE4>", "<0xBD>", "<0xA0>", "▁ok"}), "你 ok");
  EXPECT_EQ(Decode(gemma, {"a", "<0xF0>", "<0x90>", "<0x80>", "<0x80>"}), "a\xf0\x90\x80\x80");
  EXPECT_EQ(Decode(gemma, {"<0x41>", "<0x0a>", "<0x+9>"}), "A\n\t");  // as Rust's from_str_radix
  EXPECT_EQ(Decode(gemma, {"<0xZZ>", "<0x4>", "<0x041>"}), "<0xZZ><0x4><0x041>");  // not bytes
  // A run that is not valid UTF-8 becomes one U+FFFD per byte, valid characters before the bad
  // byte included (Hugging Face's ByteFallback), not the maximal-subpart rule.
  EXPECT_EQ(Decode(gemma, {"<0xE4>", "<0xBD>", "er"}), "\uFFFD\uFFFDer");
  EXPECT_EQ(Decode(gemma, {"<0xE4>", "<0xBD>", "<0xA0>", "<0xE4>"}), "\uFFFD\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(Decode(gemma, {"<0xE4>", "<0xBD>", "<0xA0>", "x", "<0xE4>"}), "你x\uFFFD");
  Decoder llama2 = Make(kLlama2);
  EXPECT_EQ(Decode(llama2, {"<0xE4>", "<0xBD>"}), "\uFFFD\uFFFD");
}

TEST(DecoderTest, StreamHoldsAByteRunUntilItEnds) {
  Decoder gemma = Make(kGemma);
  DecodeStream stream(gemma);
  std::string out;
  stream.Add("▁a", out);
  EXPECT_EQ(out, " a");
  for (const char* byte : {"<0xE4>", "<0xBD>", "<0xA0>"}) {
    stream.Add(byte, out);
    EXPECT_EQ(out, " a");  // a later byte could still make the run invalid
  }
  EXPECT_EQ(stream.pending_bytes(), 3u);
  stream.Add("▁b", out);
  EXPECT_EQ(out, " a你 b");
  stream.Add("<0xF0>", out);
  stream.Finish(out);
  EXPECT_EQ(out, " a你 b\uFFFD");
}

TEST(DecoderTest, StripAppliesAtTheStartOfTheWholeText) {
  Decoder llama2 = Make(kLlama2);
  DecodeStream stream(llama2);
  std::string out;
  stream.Add("▁", out);  // all of it stripped: the next space is the text's second
  EXPECT_EQ(out, "");
  stream.Add("▁Hi", out);
  EXPECT_EQ(out, " Hi");
  stream.Add("▁there", out);
  EXPECT_EQ(out, " Hi there");
  Decoder two = Make(Sequence(
      {kReplaceSpace, kFuse, {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 0}}}));
  EXPECT_EQ(Decode(two, {"▁", "▁", "▁x"}), " x");
  // Before Fuse, Strip acts on each token, at both ends.
  Decoder each =
      Make(Sequence({{{"type", "Strip"}, {"content", "_"}, {"start", 1}, {"stop", 2}}, kFuse}));
  EXPECT_EQ(Decode(each, {"__a___", "_b", "c__"}), "_a_bc");
}

TEST(DecoderTest, MetaspaceDropsEveryReplacementOfTheFirstToken) {
  const json first = {
      {"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}, {"split", true}};
  EXPECT_EQ(Decode(Make(first), {"▁▁", "▁discovery", "▁▁"}), " discovery  ");
  EXPECT_EQ(Decode(Make(first), {"<s>", "▁▁", "▁x"}), "<s>   x");
  json never = first;
  never["prepend_scheme"] = "never";
  EXPECT_EQ(Decode(Make(never), {"▁▁", "▁discovery"}), "   discovery");
  // The older form: add_prefix_space, true unless said otherwise.
  EXPECT_EQ(Decode(Make({{"type", "Metaspace"}, {"replacement", "▁"}}), {"▁a▁b", "▁c"}), "ab c");
  EXPECT_EQ(Decode(Make({{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", false}}),
                   {"▁a"}),
            " a");
}

TEST(DecoderTest, NullAndByteLevel) {
  // Without a decoder Hugging Face joins the spellings with spaces.
  Decoder none = Make(nullptr);
  EXPECT_FALSE(none.byte_level());
  EXPECT_EQ(Decode(none, {"▁a", "b", "<s>"}), "▁a b <s>");
  EXPECT_EQ(none.TokenBytes("b"), " b");
  // A byte-level file's null decoder, and ByteLevel: GPT-2's symbols back to bytes; a spelling
  // with another character (an added token) is its own text.
  for (const Decoder& decoder : {Make(nullptr, true), Make({{"type", "ByteLevel"}}),
                                 Make(Sequence({{{"type", "ByteLevel"}}}))}) {
    EXPECT_TRUE(decoder.byte_level());
    EXPECT_EQ(Decode(decoder, {"Hello", "Ġworld", "Ċ", "<｜end▁of▁sentence｜>", "<|eot_id|>"}),
              "Hello world\n<｜end▁of▁sentence｜><|eot_id|>");
    EXPECT_EQ(Decode(decoder, {"ä½", "ł"}), "你");  // a character cut across tokens
    EXPECT_EQ(Decode(decoder, {"ä½", "a"}), "\uFFFDa");
    EXPECT_EQ(decoder.TokenBytes("Ġthe"), " the");
    EXPECT_EQ(decoder.TokenBytes("ä½"), "\xe4\xbd");
  }
}

TEST(DecoderTest, TokenBytesIsATokenInTheMiddleOfAText) {
  Decoder llama2 = Make(kLlama2);
  EXPECT_EQ(llama2.TokenBytes("▁Hello"), " Hello");  // no strip: that is the text's start only
  EXPECT_EQ(llama2.TokenBytes("<0xE4>"), "\xe4");
  EXPECT_EQ(llama2.TokenBytes("<s>"), "<s>");
  const json first = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
  EXPECT_EQ(Make(first).TokenBytes("▁▁x"), "  x");
}

TEST(DecoderTest, UnsupportedChainsAreRefused) {
  auto expect_refused = [](const json& config, StatusCode code, const std::string& words) {
    auto made = Decoder::FromJson(config, false);
    ASSERT_FALSE(made.ok()) << config.dump();
    EXPECT_EQ(made.status().code(), code) << made.status().ToString();
    EXPECT_NE(made.status().message().find(words), std::string::npos) << made.status().ToString();
  };
  expect_refused({{"type", "WordPiece"}, {"prefix", "##"}}, StatusCode::kUnimplemented,
                 "WordPiece");
  expect_refused(
      Sequence({kFuse, {{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", " "}}}),
      StatusCode::kUnimplemented, "Replace after Fuse");
  expect_refused(
      Sequence({kFuse, {{"type", "Strip"}, {"content", " "}, {"start", 0}, {"stop", 1}}}),
      StatusCode::kUnimplemented, "stop");
  expect_refused(Sequence({kFuse, kByteFallback}), StatusCode::kUnimplemented, "ByteFallback");
  expect_refused(Sequence({{{"type", "ByteLevel"}}, kStripOne}), StatusCode::kUnimplemented,
                 "ByteLevel");
  expect_refused({{"type", "Replace"}, {"pattern", {{"Regex", "▁+"}}}, {"content", " "}},
                 StatusCode::kUnimplemented, "String");
  expect_refused({{"type", "Strip"}, {"content", "ab"}, {"start", 1}}, StatusCode::kInvalidArgument,
                 "one-character");
  expect_refused({{"type", "Strip"}, {"content", " "}, {"start", -1}}, StatusCode::kInvalidArgument,
                 "count");
  expect_refused({{"type", "Metaspace"}, {"replacement", 5}}, StatusCode::kInvalidArgument,
                 "replacement");
  expect_refused({{"type", "Sequence"}, {"decoders", 1}}, StatusCode::kInvalidArgument, "decoders");
  // One character Replace after Fuse is the same on the whole text as token by token.
  Decoder late = Make(Sequence({kByteFallback, kFuse, kReplaceSpace}));
  EXPECT_EQ(Decode(late, {"▁a", "<0xE2>", "<0x96>", "<0x81>", "b"}), " a b");
}

}  // namespace
}  // namespace pdserve::tokenizer
