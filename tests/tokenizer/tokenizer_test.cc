// Tests for tokenizer/tokenizer.h on byte-level BPE files: known ids of the real Llama-3
// tokenizer.json, model directories, invalid UTF-8, long inputs, concurrency, the tokenizer
// pdserve writes, merges forms, NFC, added-token options, malformed files and a Qwen2-style
// tokenizer. SentencePiece-style files: sentencepiece_test.cc; `pdserve tokenize`:
// tokenize_command_test.cc; the comparison with the reference tokenizers on a whole generated
// corpus: reference_corpus_test.cc.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/tokenizer/reference_tokenizers.h"
#include "tokenizer/tokenizer_writer.h"

namespace pdserve::tokenizer {
namespace {

using namespace tokenizer_testing;

// The tokenizer.json that WriteByteLevelTokenizer writes, parsed, for tests to alter.
json WrittenTokenizerJson() {
  fs::path dir = TempDir("written");
  auto size = WriteByteLevelTokenizer(dir.string());
  EXPECT_TRUE(size.ok()) << size.status().ToString();
  std::ifstream in(dir / "tokenizer.json");
  return json::parse(in);
}

TEST(TokenizerTest, Llama3KnownIdsAndSpecialTokens) {
  auto t = LoadLlama3();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(EncodeOrDie(*t, "Hello, my dog is cute", false),
            (std::vector<int32_t>{9906, 11, 856, 5679, 374, 19369}));
  EXPECT_EQ(t->vocab_size(), 128256);
  EXPECT_EQ(t->TokenId("<|eot_id|>"), 128009);
  EXPECT_EQ(t->TokenId("Hello"), 9906);
  EXPECT_EQ(t->TokenId("no such token"), std::nullopt);
  EXPECT_EQ(t->bos_id(), 128000);
  EXPECT_TRUE(t->IsSpecial(128009));
  EXPECT_FALSE(t->IsSpecial(9906));
  EXPECT_EQ(t->chat_template().format(), ChatFormat::kLlama3);  // from its special tokens
  EXPECT_EQ(t->eos_ids(), (std::vector<int32_t>{128001, 128009}));

  // Added tokens are split out of the text before pre-tokenization.
  auto ids = EncodeOrDie(*t, "<|begin_of_text|>Hi<|eot_id|> there<|eot_id", false);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 128000);
  EXPECT_EQ(ids[2], 128009);
  EXPECT_EQ(t->Decode(ids, false), "<|begin_of_text|>Hi<|eot_id|> there<|eot_id");
  EXPECT_EQ(t->Decode(ids, true), "Hi there<|eot_id");
  // Ids outside the vocab are skipped, not a crash.
  std::vector<int32_t> bad = {-5, 9906, 1 << 30};
  EXPECT_EQ(t->Decode(bad, false), "Hello");
}

TEST(TokenizerTest, ModelDirectoryReadsTokenizerConfig) {
  if (!fs::exists(kLlama3File)) FAIL() << kSetupHint;
  auto t = Tokenizer::Load(kLlama3Dir.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->bos_id(), 128000);
  // eos_token <|end_of_text|> from the config, plus the chat template's end of turn.
  EXPECT_EQ((*t)->eos_ids(), (std::vector<int32_t>{128001, 128009}));
  EXPECT_EQ((*t)->chat_template().format(), ChatFormat::kLlama3);
  // This tokenizer.json's post_processor is ByteLevel: add_special adds nothing (as in HF).
  EXPECT_EQ(EncodeOrDie(**t, "Hi", true), EncodeOrDie(**t, "Hi", false));
}

TEST(TokenizerTest, InvalidUtf8IsAnErrorNotACrash) {
  auto t = LoadLlama3();
  ASSERT_NE(t, nullptr);
  for (std::string_view bad : {std::string_view("\xff"), std::string_view("ok\xc0\xaf"),
                               std::string_view("\xed\xa0\x80"), std::string_view("a\xe2\x82"),
                               std::string_view("\xf4\x90\x80\x80"), std::string_view("\x80")}) {
    auto ids = t->Encode(bad, false);
    ASSERT_FALSE(ids.ok());
    EXPECT_EQ(ids.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(ids.status().message().find("UTF-8"), std::string::npos);
  }
  // NUL and the largest code point are valid.
  EXPECT_TRUE(t->Encode(std::string_view("a\0b\xf4\x8f\xbf\xbf", 7), false).ok());
  EXPECT_TRUE(t->Encode("", true).ok());
}

TEST(TokenizerTest, LongInputsAreNotQuadratic) {
  auto t = LoadLlama3();
  ASSERT_NE(t, nullptr);
  auto start = std::chrono::steady_clock::now();
  for (std::string text : {std::string(200000, 'a'), std::string(200000, ' '),
                           std::string(100000, '7'), std::string(50000, '\n')}) {
    auto ids = EncodeOrDie(*t, text, false);
    EXPECT_EQ(t->Decode(ids, false), text);
  }
  std::string cjk;
  for (int i = 0; i < 20000; ++i) cjk += "\xe9\xbe\x8d";  // 龍, one long \p{L}+ run
  EXPECT_EQ(t->Decode(EncodeOrDie(*t, cjk, false), false), cjk);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST(TokenizerTest, ConcurrentEncodeGivesTheSameIds) {
  auto t = LoadLlama3();
  ASSERT_NE(t, nullptr);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) {
    texts.push_back("request " + std::to_string(i * 7919) + " ação 你好 🇧🇷 it's   fine\n");
  }
  std::vector<std::vector<int32_t>> expected;
  for (const auto& text : texts) expected.push_back(EncodeOrDie(*t, text, false));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          size_t j = (i * (k + 1) + round) % texts.size();
          auto ids = t->Encode(texts[j], false);
          if (!ids.ok() || *ids != expected[j]) ++mismatches;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerTest, WrittenTokenizerLoadsAndRoundTrips) {
  fs::path dir = TempDir("writer");
  auto size = WriteByteLevelTokenizer(dir.string());
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, kByteLevelMinVocabSize);
  auto t = Tokenizer::Load(dir.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Tokenizer& tok = **t;
  EXPECT_EQ(tok.vocab_size(), *size);
  EXPECT_EQ(tok.bos_id(), kByteLevelBosId);
  EXPECT_EQ(tok.TokenId("<|eot_id|>"), kByteLevelEotId);
  EXPECT_EQ(tok.TokenId("<|end_of_text|>"), kByteLevelEndOfTextId);
  EXPECT_EQ(tok.eos_ids(), (std::vector<int32_t>{kByteLevelEotId}));
  EXPECT_EQ(tok.chat_template().format(), ChatFormat::kLlama3);
  EXPECT_EQ(tok.TokenId("a"), 'a');  // byte tokens: id = byte value
  std::string text = "the model answered the question: 42 ações, 你好 👍🏽\n\tdone";
  auto plain = EncodeOrDie(tok, text, false);
  EXPECT_LT(plain.size(), text.size() * 3 / 4) << "merges should shorten English";
  EXPECT_EQ(tok.Decode(plain, false), text);
  auto with_bos = EncodeOrDie(tok, text, true);
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos.front(), kByteLevelBosId);
  EXPECT_EQ(tok.Decode(with_bos, true), text);
  for (int32_t id : with_bos) EXPECT_LT(id, tok.vocab_size());

  // Deterministic, and padded to a requested vocab size with reserved special tokens.
  std::ifstream first(dir / "tokenizer.json");
  std::string first_text((std::istreambuf_iterator<char>(first)), {});
  ASSERT_TRUE(WriteByteLevelTokenizer(dir.string(), 1024).ok());
  auto padded = Tokenizer::Load(dir.string());
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  EXPECT_EQ((*padded)->vocab_size(), 1024);
  EXPECT_TRUE((*padded)->IsSpecial(1023));
  EXPECT_EQ(EncodeOrDie(**padded, text, true), with_bos);
  ASSERT_TRUE(WriteByteLevelTokenizer(dir.string()).ok());
  std::ifstream second(dir / "tokenizer.json");
  EXPECT_EQ(first_text, std::string((std::istreambuf_iterator<char>(second)), {}));
  EXPECT_FALSE(WriteByteLevelTokenizer(dir.string(), 100).ok());
}

TEST(TokenizerTest, LargePaddedVocabStaysFast) {
  fs::path dir = TempDir("padded");
  ASSERT_TRUE(WriteByteLevelTokenizer(dir.string(), 32000).ok());
  auto t = Tokenizer::Load(dir.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ((*t)->vocab_size(), 32000);
  // 31227 reserved tokens all start with "<|": matching must not scan them one by one.
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "<|<a> ";
  text += "<|reserved_special_token_100|>";
  auto start = std::chrono::steady_clock::now();
  auto ids = EncodeOrDie(**t, text, false);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), kByteLevelMinVocabSize + 100);
  EXPECT_EQ((*t)->Decode(ids, false), text);
}

TEST(TokenizerTest, MergesArrayFormEqualsStringForm) {
  json root = WrittenTokenizerJson();
  auto strings = Tokenizer::FromJsonText(root.dump(), "", "strings");
  ASSERT_TRUE(strings.ok()) << strings.status().ToString();
  json arrays = root;
  for (json& merge : arrays["model"]["merges"]) {
    std::string s = merge.get<std::string>();
    size_t space = s.find(' ');
    merge = json::array({s.substr(0, space), s.substr(space + 1)});
  }
  auto from_arrays = Tokenizer::FromJsonText(arrays.dump(), "", "arrays");
  ASSERT_TRUE(from_arrays.ok()) << from_arrays.status().ToString();
  for (std::string text : {"the people would know", "something else entirely, 123"}) {
    EXPECT_EQ(EncodeOrDie(**strings, text, false), EncodeOrDie(**from_arrays, text, false));
  }
}

TEST(TokenizerTest, NfcNormalizer) {
  json root = WrittenTokenizerJson();
  root["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}};
  auto t = Tokenizer::FromJsonText(root.dump(), "", "nfc");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  // "e" + COMBINING ACUTE ACCENT composes to "é" before BPE.
  EXPECT_EQ(EncodeOrDie(**t, "cafe\xcc\x81", false), EncodeOrDie(**t, "caf\xc3\xa9", false));
  EXPECT_EQ((*t)->Decode(EncodeOrDie(**t, "cafe\xcc\x81", false), false), "caf\xc3\xa9");
  root["normalizer"] = {{"type", "Lowercase"}};
  auto refused = Tokenizer::FromJsonText(root.dump(), "", "lower.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(refused.status().message().find("Lowercase"), std::string::npos);
  EXPECT_NE(refused.status().message().find("lower.json"), std::string::npos);
}

TEST(TokenizerTest, AddedTokenOptions) {
  json root = WrittenTokenizerJson();
  auto add = [&](int id, const std::string& content, bool lstrip, bool rstrip, bool single_word) {
    root["added_tokens"].push_back({{"id", id},
                                    {"content", content},
                                    {"lstrip", lstrip},
                                    {"rstrip", rstrip},
                                    {"single_word", single_word},
                                    {"normalized", false},
                                    {"special", false}});
  };
  add(2000, "<mask>", true, true, false);
  add(2001, "cat", false, false, true);
  add(2002, "<mas", false, false, false);  // shorter overlapping token: longest match wins
  auto t = Tokenizer::FromJsonText(root.dump(), "", "added");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Tokenizer& tok = **t;
  EXPECT_EQ(tok.vocab_size(), 2003);
  auto ids = EncodeOrDie(tok, "a  <mask>  b", false);
  EXPECT_EQ(ids, (std::vector<int32_t>{'a', 2000, 'b'}));  // lstrip/rstrip take the spaces
  EXPECT_EQ(EncodeOrDie(tok, "<mas", false), (std::vector<int32_t>{2002}));
  auto word = EncodeOrDie(tok, "cat", false);
  EXPECT_EQ(word, (std::vector<int32_t>{2001}));
  auto inside = EncodeOrDie(tok, "concatenate", false);  // single_word: no match inside a word
  EXPECT_EQ(std::count(inside.begin(), inside.end(), 2001), 0);
  EXPECT_EQ(tok.Decode(inside, false), "concatenate");
  EXPECT_FALSE(tok.IsSpecial(2001));
  EXPECT_EQ(tok.Decode(EncodeOrDie(tok, "x cat y", false), true), "x cat y");
}

TEST(TokenizerTest, MalformedFilesGiveClearErrors) {
  fs::path dir = TempDir("malformed");
  fs::path broken = dir / "tokenizer.json";
  std::ofstream(broken) << "{\"model\": {\"type\": \"BPE\", \"vocab\": ";
  auto t = Tokenizer::Load(broken.string());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find(broken.string()), std::string::npos);
  EXPECT_NE(t.status().message().find("not valid JSON"), std::string::npos);

  auto missing = Tokenizer::Load((dir / "nope.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  json root = WrittenTokenizerJson();
  root["model"]["merges"].push_back("q zzz");
  auto bad_merge = Tokenizer::FromJsonText(root.dump(), "", "bad_merge.json");
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.status().message().find("bad_merge.json"), std::string::npos);
  EXPECT_NE(bad_merge.status().message().find("merges[512]"), std::string::npos);

  root = WrittenTokenizerJson();
  root["model"]["vocab"]["oops"] = "seven";
  auto bad_id = Tokenizer::FromJsonText(root.dump(), "", "x");
  ASSERT_FALSE(bad_id.ok());
  EXPECT_NE(bad_id.status().message().find("oops"), std::string::npos);

  root = WrittenTokenizerJson();
  root["added_tokens"][0]["id"] = "zero";
  auto bad_added = Tokenizer::FromJsonText(root.dump(), "", "x");
  ASSERT_FALSE(bad_added.ok());
  EXPECT_EQ(bad_added.status().code(), StatusCode::kInvalidArgument);

  root = WrittenTokenizerJson();
  root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  auto bad_regex = Tokenizer::FromJsonText(root.dump(), "", "x");
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_NE(bad_regex.status().message().find("regex"), std::string::npos);

  root = WrittenTokenizerJson();
  root["model"]["type"] = "Unigram";
  auto unigram = Tokenizer::FromJsonText(root.dump(), "", "x");
  ASSERT_FALSE(unigram.ok());
  EXPECT_EQ(unigram.status().code(), StatusCode::kUnimplemented);

  EXPECT_FALSE(Tokenizer::FromJsonText("[1, 2]", "", "x").ok());
  EXPECT_FALSE(Tokenizer::FromJsonText("{}", "", "x").ok());
}

TEST(TokenizerTest, SpecialTokensCanBeTreatedAsText) {
  auto t = LoadLlama3();
  ASSERT_NE(t, nullptr);
  auto parsed = EncodeOrDie(*t, "a<|eot_id|>b", false);
  auto ids = t->Encode("a<|eot_id|>b", false, /*parse_special=*/false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(std::count(parsed.begin(), parsed.end(), 128009), 1);
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 128009), 0);
  EXPECT_EQ(t->Decode(*ids, true), "a<|eot_id|>b");
}

// A Qwen2-style tokenizer: NFC, single-digit numbers, ChatML tokens, no BOS, ByteLevel
// post_processor. Built from the written tokenizer with Qwen2's settings.
TEST(TokenizerTest, Qwen2StyleTokenizer) {
  json root = WrittenTokenizerJson();
  root["normalizer"] = {{"type", "NFC"}};
  root["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  root["post_processor"] = {{"type", "ByteLevel"},
                            {"add_prefix_space", false},
                            {"trim_offsets", false},
                            {"use_regex", false}};
  int id = 900;
  for (const char* name : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    root["added_tokens"].push_back(
        {{"id", id++}, {"content", name}, {"special", true}, {"normalized", false}});
  }
  json config = {{"bos_token", nullptr},
                 {"eos_token", "<|im_end|>"},
                 {"chat_template",
                  "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                  "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
                  "{% if add_generation_prompt %}{{'<|im_start|>assistant\\n'}}{% endif %}"}};
  json generation = {{"eos_token_id", {902, 900}}};
  auto t = Tokenizer::FromJsonText(root.dump(), config.dump(), "qwen", generation.dump());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const Tokenizer& tok = **t;
  EXPECT_EQ(tok.bos_id(), std::nullopt);
  EXPECT_EQ(tok.eos_ids(), (std::vector<int32_t>{902, 900}));
  EXPECT_EQ(tok.chat_template().format(), ChatFormat::kChatMl);
  EXPECT_EQ(tok.vocab_size(), 903);
  auto prompt = tok.chat_template().Apply(std::vector<ChatMessage>{{"user", "12"}}, true);
  ASSERT_TRUE(prompt.ok());
  auto ids = EncodeOrDie(tok, *prompt, true);  // add_special adds nothing here
  std::vector<int32_t> expected = {901};
  for (int32_t x : EncodeOrDie(tok, "user\n12", false)) expected.push_back(x);
  expected.push_back(902);
  expected.push_back('\n');
  expected.push_back(901);
  for (int32_t x : EncodeOrDie(tok, "assistant\n", false)) expected.push_back(x);
  EXPECT_EQ(ids, expected);
  auto digits = EncodeOrDie(tok, "2024", false);  // \p{N} one digit at a time
  EXPECT_EQ(digits, (std::vector<int32_t>{'2', '0', '2', '4'}));
  EXPECT_EQ(tok.Decode(ids, false), *prompt);
}

}  // namespace
}  // namespace pdserve::tokenizer
