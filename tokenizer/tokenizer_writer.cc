#include "tokenizer/tokenizer_writer.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tokenizer/byte_level.h"

namespace pdserve::tokenizer {
namespace {

using ordered_json = nlohmann::ordered_json;

// Llama-3's pre-tokenizer regex, as its tokenizer.json writes it.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Meta's Llama-3 Instruct chat template.
constexpr std::string_view kLlama3ChatTemplate =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
    "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

constexpr std::string_view kSpecialTokens[] = {
    "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
    "<|end_header_id|>", "<|eot_id|>",
};

// Common English letter pairs, then words; each word is merged left to right, with and
// without a leading space, until kByteLevelMergeCount merges exist.
constexpr std::string_view kPairs[] = {"th", "he", "in", "er", "an", "re", "on", "at", "en",
                                       "nd", "ti", "es", "or", "te", "of", "ed", "is", "it",
                                       "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as",
                                       "ou", "io", "le", "ve", "co", "me", "de", "hi", "ri"};
constexpr std::string_view kWords[] = {
    "the",   "be",     "to",        "of",      "and",      "a",      "in",      "that",  "have",
    "I",     "it",     "for",       "not",     "on",       "with",   "he",      "as",    "you",
    "do",    "at",     "this",      "but",     "his",      "by",     "from",    "they",  "we",
    "say",   "her",    "she",       "or",      "an",       "will",   "my",      "one",   "all",
    "would", "there",  "their",     "what",    "so",       "up",     "out",     "if",    "about",
    "who",   "get",    "which",     "go",      "me",       "when",   "make",    "can",   "like",
    "time",  "no",     "just",      "him",     "know",     "take",   "people",  "into",  "year",
    "your",  "good",   "some",      "could",   "them",     "see",    "other",   "than",  "then",
    "now",   "look",   "only",      "come",    "its",      "over",   "think",   "also",  "back",
    "after", "use",    "two",       "how",     "our",      "work",   "first",   "well",  "way",
    "even",  "new",    "want",      "because", "any",      "these",  "give",    "day",   "most",
    "us",    "is",     "are",       "was",     "were",     "been",   "has",     "had",   "did",
    "said",  "model",  "token",     "hello",   "world",    "server", "request", "cache", "prompt",
    "user",  "system", "assistant", "answer",  "question", "number", "water",   "story", "small",
    "large", "great",  "little",    "house",   "place",    "where",  "while",   "never", "always",
};

ordered_json ByteLevelStep(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

Status WriteText(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return Unavailable("cannot write " + tmp.string());
  }
  std::error_code error;
  std::filesystem::rename(tmp, path, error);
  if (error) return Unavailable("cannot rename " + tmp.string() + ": " + error.message());
  return Status::Ok();
}

}  // namespace

Result<int32_t> WriteByteLevelTokenizer(const std::string& model_dir, int32_t vocab_size) {
  if (vocab_size == 0) vocab_size = kByteLevelMinVocabSize;
  if (vocab_size < kByteLevelMinVocabSize || vocab_size > (1 << 24)) {
    return InvalidArgument("tokenizer vocab_size " + std::to_string(vocab_size) + " is outside [" +
                           std::to_string(kByteLevelMinVocabSize) + ", 2^24]");
  }
  // Vocab in id order: bytes, then merges as they are made.
  std::vector<std::string> vocab;  // byte-level spellings
  std::unordered_set<std::string> known;
  for (int b = 0; b < 256; ++b) {
    vocab.emplace_back(ByteToSymbol(static_cast<uint8_t>(b)));
    known.insert(vocab.back());
  }
  ordered_json merges = ordered_json::array();
  auto merge_chain = [&](std::string_view bytes) {
    std::string left = BytesToSymbols(bytes.substr(0, 1));
    for (size_t i = 1; i < bytes.size() && merges.size() < kByteLevelMergeCount; ++i) {
      std::string right = BytesToSymbols(bytes.substr(i, 1));
      std::string merged = left + right;
      if (known.insert(merged).second) {
        merges.push_back(left + " " + right);
        vocab.push_back(merged);
      }
      left = std::move(merged);
    }
  };
  for (std::string_view pair : kPairs) merge_chain(pair);
  for (std::string_view word : kWords) {
    std::string spaced(1, ' ');
    spaced.append(word);
    merge_chain(spaced);
    merge_chain(word);
  }
  if (static_cast<int32_t>(merges.size()) != kByteLevelMergeCount) {
    return Internal("built-in word list yields only " + std::to_string(merges.size()) +
                    " merges, not " + std::to_string(kByteLevelMergeCount));
  }

  ordered_json vocab_json = ordered_json::object();
  for (size_t id = 0; id < vocab.size(); ++id) vocab_json[vocab[id]] = id;
  ordered_json added = ordered_json::array();
  auto add_special = [&](int32_t id, const std::string& content) {
    added.push_back({{"id", id},
                     {"content", content},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  };
  int32_t id = kByteLevelSpecialBase;
  for (std::string_view name : kSpecialTokens) add_special(id++, std::string(name));
  for (int32_t n = 0; id < vocab_size; ++n) {
    add_special(id++, "<|reserved_special_token_" + std::to_string(n) + "|>");
  }

  const std::string bos(kSpecialTokens[0]);
  ordered_json bos_entry = {{"id", bos}, {"ids", {kByteLevelBosId}}, {"tokens", {bos}}};
  ordered_json tokenizer = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"},
           {"pattern", {{"Regex", std::string(kLlama3Pattern)}}},
           {"behavior", "Isolated"},
           {"invert", false}},
          ByteLevelStep(false, false)}}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair",
         {{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
          {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
          {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
          {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{bos, bos_entry}}}}},
      {"decoder", ByteLevelStep(true, true)},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", true},
        {"vocab", vocab_json},
        {"merges", merges}}},
  };
  ordered_json config = {
      {"bos_token", bos},
      {"eos_token", std::string(kSpecialTokens[4])},
      {"chat_template", std::string(kLlama3ChatTemplate)},
      {"clean_up_tokenization_spaces", false},
      {"model_input_names", {"input_ids", "attention_mask"}},
      {"model_max_length", 1 << 20},
      {"tokenizer_class", "PreTrainedTokenizerFast"},
  };

  std::filesystem::path dir(model_dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return Unavailable("cannot create " + dir.string() + ": " + error.message());
  PDSERVE_RETURN_IF_ERROR(WriteText(dir / "tokenizer.json", tokenizer.dump(1) + "\n"));
  PDSERVE_RETURN_IF_ERROR(WriteText(dir / "tokenizer_config.json", config.dump(2) + "\n"));
  return vocab_size;
}

}  // namespace pdserve::tokenizer
