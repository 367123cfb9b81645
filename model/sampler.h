// SamplingParams (what a request asks for), Sampler (turns one row of logits into a token) and
// ArgMax (the greedy pick, also used for a row's largest logit).
// Greedy when temperature is 0; otherwise temperature, top-k and top-p (nucleus) with a per-request
// random stream, reproducible when a seed is given. A sample costs one pass over the vocabulary,
// plus ordering only the most likely tokens a top-k or top-p cut keeps (a decode worker samples
// its whole batch on its engine thread every step). A Sampler belongs to one sequence and is used
// by the engine thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace pdserve::model {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy; must be in [0, 100]
  float top_p = 1.0f;  // keep the smallest set of tokens whose probability reaches top_p; (0, 1]
  int top_k = 0;       // keep the k most likely tokens; 0 = all
  std::optional<uint64_t> seed;
  int max_tokens = 16;                  // tokens to generate at most; >= 1
  std::vector<int32_t> stop_token_ids;  // end the sequence (the token is not returned as text)
  std::vector<std::string> stop;        // stop strings, matched on text by StopStringMatcher
  bool ignore_eos = false;              // keep going past end-of-sequence tokens (load tests)
  // A JSON Schema's text the output follows, token by token (grammar/json_grammar.h: compact
  // JSON, the schema's subset); empty: free text. The engine masks the logits before sampling.
  std::string json_schema;
  // Fixed text before and after the schema's value (a tool call's syntax); only with a schema.
  std::string json_prefix, json_suffix;
  // -1: no log-probabilities. 0..20: each sampled token's, and this many of the most likely
  // tokens' (model/logprobs.h: the model's distribution, before temperature and masks).
  int logprobs = -1;
  // Also the prompt's tokens' (each but the first, with `logprobs` of the most likely), on the
  // first token's event; needs logprobs >= 0. The whole prompt is computed for them (no prefix
  // cache), at most kMaxPromptLogprobRows tokens a step.
  bool prompt_logprobs = false;
  static constexpr int kMaxPromptLogprobRows = 256;
  // OpenAI's logit_bias: added to these tokens' logits before sampling (after logprobs are
  // taken); each token in the vocabulary, each bias in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Tokens of this request sampled before (a stream resumed on other workers): its random
  // stream starts past their draws, so a seeded request goes on as if never moved.
  int samples_drawn = 0;  // [0, kMaxSamplesDrawn]
  static constexpr int kMaxSamplesDrawn = 1 << 24;
  // OpenAI's n: this many choices of one prompt, which runs once (Engine::Add). Choice i > 0
  // samples with seed + i where a seed is set, its own random stream otherwise.
  int n = 1;  // [1, kMaxChoices]
  static constexpr int kMaxChoices = 128;

  // Says which field is out of range.
  Status Validate() const;
  bool greedy() const { return temperature == 0.0f || top_k == 1; }
};

// The index of the largest value, the lowest among equal maxima (std::max_element's answer
// where there is no NaN), about ten times as fast (AVX2, four running maxima): greedy decoding
// takes one a sequence a step, over the whole vocabulary. NaNs never win: the first largest of
// the other values, or 0 when every value is NaN, as the CUDA backend's argmax gives.
int32_t ArgMax(std::span<const float> values);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks a token from logits[vocab]. Greedy picks the lowest id among equal maxima.
  int32_t Sample(std::span<const float> logits);
  // Advances the random stream past one Sample, for a sequence whose first token was sampled
  // by another process (a prefill worker) with the same seed, so the rest of its stream matches.
  void SkipSample();

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch, reused across steps
};

}  // namespace pdserve::model
