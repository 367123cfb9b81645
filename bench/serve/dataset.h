// The prompts a serving benchmark sends: random words of a chosen length in tokens (vLLM's
// `random` dataset; in words without a tokenizer), the first turn of ShareGPT conversations, or a
// JSONL file of prompts; and which of the file formats a dataset file holds (multi-turn
// conversations are in conversation.h, Mooncake traces in mooncake_trace.h). Token counts come from
// a TokenCounter: a tokenizer when one is given, else an estimate (see EstimateTokens). Pure
// functions over files and values: thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pdserve::bench {

struct BenchPrompt {
  std::string prompt;
  int64_t prompt_tokens = 0;  // by the TokenCounter in use
  int64_t output_len = 0;     // sent as max_tokens
};

using TokenCounter = std::function<int64_t(std::string_view)>;

// One token per four bytes, rounded up: the usual rule of thumb for English with BPE tokenizers.
int64_t EstimateTokens(std::string_view text);
// By `counter` when there is one, else EstimateTokens.
int64_t CountTokens(const TokenCounter& counter, std::string_view text);

// The whole file; NotFound naming it when it cannot be read.
Result<std::string> ReadDatasetFile(const std::string& path);

// Random common English words: without a `counter`, `tokens` words (each one token in common BPE
// vocabs) and tokens == that; with one, words fitted so that the counter gives `tokens` (or
// within a word of it) and tokens is what it says. Draws the words from `rng` in order, so the
// first n words of a longer text from the same state are the text of n words.
struct WordText {
  std::string text;
  int64_t tokens = 0;
};
WordText RandomWordText(int64_t tokens, std::mt19937_64& rng, const TokenCounter& counter);

struct RandomDatasetOptions {
  int64_t num_prompts = 1000;
  int64_t input_len = 1024;  // mean prompt length: tokens with a counter, else words
  int64_t output_len = 128;  // mean max_tokens
  double range_ratio = 0.0;  // lengths uniform in [len * (1 - r), len * (1 + r)]; 0 <= r < 1
  uint64_t seed = 0;
};

// Prompts of random common English words. Without a `counter`, input_len counts words (one
// token each in common BPE vocabs) and prompt_tokens is the word count; with one, the words are
// fitted so that the counter gives input_len tokens (or within a word of it) and prompt_tokens
// is what it says.
Result<std::vector<BenchPrompt>> SampleRandomPrompts(const RandomDatasetOptions& options,
                                                     const TokenCounter& counter = nullptr);

// ShareGPT JSON (an array of {"conversations":[{"from","value"},...]}), as vLLM samples it:
// shuffled by seed, first turn as prompt, second turn's length as output_len unless
// `fixed_output_len` is set; pairs with prompt < 4 or output < 4 tokens, prompt > 1024 or
// prompt + output > 2048 tokens are skipped.
Result<std::vector<BenchPrompt>> LoadShareGptPrompts(const std::string& path, int64_t num_prompts,
                                                     uint64_t seed,
                                                     std::optional<int64_t> fixed_output_len,
                                                     const TokenCounter& counter);

// JSONL: one prompt per line, either a JSON string or an object with "prompt" (or "text") and
// optionally "output_len" or "max_tokens" (else `default_output_len`). Blank lines are skipped.
// The file is repeated in order when it holds fewer than num_prompts prompts.
Result<std::vector<BenchPrompt>> LoadJsonlPrompts(const std::string& path, int64_t num_prompts,
                                                  int64_t default_output_len,
                                                  const TokenCounter& counter);

// What a dataset file holds, from its content: "sharegpt" (a JSON array), "mooncake" (JSONL
// whose first record has "hash_ids" or "input_length") or "jsonl" (other JSONL). NotFound when
// the file cannot be read; InvalidArgument, naming the file and line, when its first record is
// not JSON.
Result<std::string> DetectDatasetFormat(const std::string& path);

}  // namespace pdserve::bench
