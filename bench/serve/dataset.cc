#include "bench/serve/dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace pdserve::bench {
namespace {

using nlohmann::json;

// Short, frequent words: each is a single token (with its leading space) in the GPT-2, Llama
// and Qwen vocabularies, so a prompt of n words is close to n tokens.
constexpr std::string_view kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",
    "was",   "with",  "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",
    "his",   "from",  "at",    "which", "but",   "have",  "an",    "had",   "they",  "you",
    "were",  "their", "one",   "all",   "we",    "can",   "her",   "has",   "there", "been",
    "if",    "more",  "when",  "will",  "would", "who",   "so",    "no",    "she",   "other",
    "its",   "may",   "these", "what",  "them",  "than",  "some",  "him",   "time",  "into",
    "only",  "do",    "two",   "most",  "could", "our",   "about", "then",  "first", "also",
    "new",   "very",  "my",    "over",  "like",  "such",  "after", "year",  "made",  "many",
    "world", "state", "work",  "water", "life",  "day",   "house", "city",  "night", "road",
    "light", "stone", "river", "music", "paper", "table", "green", "small", "large", "open"};

std::string JoinWords(const std::vector<std::string_view>& words) {
  std::string text;
  text.reserve(words.size() * 7);
  for (std::string_view w : words) {
    if (!text.empty()) text.push_back(' ');
    text.append(w);
  }
  return text;
}

}  // namespace

Result<std::string> ReadDatasetFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(fmt::format("cannot open dataset file '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return std::move(ss).str();
}

int64_t EstimateTokens(std::string_view text) {
  return static_cast<int64_t>((text.size() + 3) / 4);
}

int64_t CountTokens(const TokenCounter& counter, std::string_view text) {
  return counter ? counter(text) : EstimateTokens(text);
}

WordText RandomWordText(int64_t tokens, std::mt19937_64& rng, const TokenCounter& counter) {
  std::uniform_int_distribution<size_t> word(0, std::size(kWords) - 1);
  std::vector<std::string_view> words;
  words.reserve(static_cast<size_t>(std::max<int64_t>(0, tokens)));
  while (static_cast<int64_t>(words.size()) < tokens) words.push_back(kWords[word(rng)]);
  WordText out{JoinWords(words), tokens};
  if (!counter) return out;
  out.tokens = counter(out.text);
  // A tokenizer may split a word into several tokens: rescale the word count until the text is
  // `tokens` tokens or the closest it gets (vLLM's random dataset is exact in tokens too).
  for (int round = 0; round < 8 && out.tokens != tokens; ++round) {
    const double per_word =
        static_cast<double>(out.tokens) / static_cast<double>(std::max<size_t>(1, words.size()));
    int64_t want = static_cast<int64_t>(std::llround(static_cast<double>(tokens) / per_word));
    if (want == static_cast<int64_t>(words.size())) want += out.tokens < tokens ? 1 : -1;
    want = std::max<int64_t>(1, want);
    while (static_cast<int64_t>(words.size()) > want) words.pop_back();
    while (static_cast<int64_t>(words.size()) < want) words.push_back(kWords[word(rng)]);
    out.text = JoinWords(words);
    out.tokens = counter(out.text);
  }
  return out;
}

Result<std::vector<BenchPrompt>> SampleRandomPrompts(const RandomDatasetOptions& options,
                                                     const TokenCounter& counter) {
  if (options.num_prompts < 0) return InvalidArgument("--num-prompts is negative");
  if (options.input_len < 1 || options.output_len < 1) {
    return InvalidArgument("--random-input-len and --random-output-len must be >= 1");
  }
  if (options.range_ratio < 0 || options.range_ratio >= 1) {
    return InvalidArgument(
        fmt::format("--random-range-ratio {} must be in [0, 1)", options.range_ratio));
  }
  auto bounds = [&](int64_t len) {
    int64_t lo = static_cast<int64_t>(std::floor(len * (1 - options.range_ratio)));
    int64_t hi = static_cast<int64_t>(std::ceil(len * (1 + options.range_ratio)));
    return std::uniform_int_distribution<int64_t>(std::max<int64_t>(1, lo),
                                                  std::max<int64_t>(1, hi));
  };
  std::mt19937_64 rng(options.seed);
  auto input_len = bounds(options.input_len);
  auto output_len = bounds(options.output_len);
  std::vector<BenchPrompt> prompts;
  prompts.reserve(static_cast<size_t>(options.num_prompts));
  for (int64_t i = 0; i < options.num_prompts; ++i) {
    BenchPrompt p;
    const int64_t target = input_len(rng);
    p.output_len = output_len(rng);
    WordText words = RandomWordText(target, rng, counter);
    p.prompt = std::move(words.text);
    p.prompt_tokens = words.tokens;
    prompts.push_back(std::move(p));
  }
  return prompts;
}

Result<std::vector<BenchPrompt>> LoadShareGptPrompts(const std::string& path, int64_t num_prompts,
                                                     uint64_t seed,
                                                     std::optional<int64_t> fixed_output_len,
                                                     const TokenCounter& counter) {
  PDSERVE_ASSIGN_OR_RETURN(std::string text, ReadDatasetFile(path));
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  text = std::string();
  if (doc.is_discarded() || !doc.is_array()) {
    return InvalidArgument(fmt::format("'{}' is not a ShareGPT JSON array", path));
  }
  std::vector<std::pair<const std::string*, const std::string*>> pairs;
  for (const json& entry : doc) {
    if (!entry.is_object()) continue;
    auto conv = entry.find("conversations");
    if (conv == entry.end() || !conv->is_array() || conv->size() < 2) continue;
    const json& first = (*conv)[0];
    const json& second = (*conv)[1];
    if (!first.is_object() || !second.is_object()) continue;
    auto a = first.find("value");
    auto b = second.find("value");
    if (a == first.end() || b == second.end() || !a->is_string() || !b->is_string()) continue;
    pairs.emplace_back(&a->get_ref<const std::string&>(), &b->get_ref<const std::string&>());
  }
  std::mt19937_64 rng(seed);
  std::shuffle(pairs.begin(), pairs.end(), rng);
  std::vector<BenchPrompt> prompts;
  for (const auto& [prompt, completion] : pairs) {
    if (static_cast<int64_t>(prompts.size()) >= num_prompts) break;
    int64_t prompt_len = CountTokens(counter, *prompt);
    int64_t output_len = fixed_output_len ? *fixed_output_len : CountTokens(counter, *completion);
    if (prompt_len < 4 || (!fixed_output_len && output_len < 4)) continue;
    if (prompt_len > 1024 || prompt_len + output_len > 2048) continue;
    prompts.push_back({*prompt, prompt_len, output_len});
  }
  if (static_cast<int64_t>(prompts.size()) < num_prompts) {
    return InvalidArgument(fmt::format("'{}' has only {} usable conversations, {} asked for", path,
                                       prompts.size(), num_prompts));
  }
  return prompts;
}

Result<std::vector<BenchPrompt>> LoadJsonlPrompts(const std::string& path, int64_t num_prompts,
                                                  int64_t default_output_len,
                                                  const TokenCounter& counter) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open dataset file '{}'", path));
  std::vector<BenchPrompt> file_prompts;
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
    auto bad = [&](std::string_view why) {
      return InvalidArgument(fmt::format("{}:{}: {}", path, line_number, why));
    };
    if (doc.is_discarded()) return bad("not JSON");
    BenchPrompt p;
    p.output_len = default_output_len;
    if (doc.is_string()) {
      p.prompt = doc.get<std::string>();
    } else if (doc.is_object()) {
      auto text = doc.find("prompt");
      if (text == doc.end()) text = doc.find("text");
      if (text == doc.end() || !text->is_string()) return bad("no string \"prompt\" field");
      p.prompt = text->get<std::string>();
      for (const char* key : {"output_len", "max_tokens"}) {
        auto it = doc.find(key);
        if (it == doc.end()) continue;
        if (!it->is_number_integer() || it->get<int64_t>() < 1) {
          return bad(fmt::format("\"{}\" must be an integer >= 1", key));
        }
        p.output_len = it->get<int64_t>();
      }
    } else {
      return bad("expected a JSON string or object");
    }
    p.prompt_tokens = CountTokens(counter, p.prompt);
    file_prompts.push_back(std::move(p));
  }
  if (file_prompts.empty()) return InvalidArgument(fmt::format("'{}' holds no prompts", path));
  std::vector<BenchPrompt> prompts;
  prompts.reserve(static_cast<size_t>(std::max<int64_t>(0, num_prompts)));
  for (int64_t i = 0; i < num_prompts; ++i) {
    prompts.push_back(file_prompts[static_cast<size_t>(i) % file_prompts.size()]);
  }
  return prompts;
}

Result<std::string> DetectDatasetFormat(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot open dataset file '{}'", path));
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    if (line[first] == '[') return std::string("sharegpt");
    json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      return InvalidArgument(fmt::format(
          "{}:{}: neither a JSON array (ShareGPT) nor a JSON line (JSONL, Mooncake trace)", path,
          line_number));
    }
    if (doc.is_object() && (doc.contains("hash_ids") || doc.contains("input_length"))) {
      return std::string("mooncake");
    }
    return std::string("jsonl");
  }
  return InvalidArgument(fmt::format("'{}' is empty", path));
}

}  // namespace pdserve::bench
