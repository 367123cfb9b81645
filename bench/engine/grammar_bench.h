// `pdserve bench grammar`: what a response format costs a decode step. Requests under a JSON
// schema are generated over a real tokenizer's vocabulary (Llama-3's 128k tokens, say), each
// token's mask and advance timed; the yardstick is the unconstrained batch-1 decode step of a
// model (the small preset) timed in the same run. Runs on the calling thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace pdserve::bench {

struct GrammarBenchOptions {
  std::string model_dir;       // whose decode step is the yardstick
  std::string vocabulary_dir;  // the tokenizer whose vocabulary the masks cover
  std::string schema;          // a JSON Schema's text; empty: kNestedBenchSchema
  int requests = 20;           // generated one after another, all under the same schema
  int max_tokens = 256;        // per request
  int decode_steps = 32;       // timed unconstrained decode steps
  int threads = 0;             // the engine's CPU threads; 0: all
  uint64_t seed = 1;
  // false: every mask computed by the vocabulary walk (a planted fault: the gate must fail).
  bool cache_masks = true;
};

struct GrammarBenchResult {
  int vocab_size = 0;
  int requests = 0;
  int requests_complete = 0;  // ended as whole JSON within max_tokens
  int64_t tokens = 0;
  // Per generated token: its mask applied to the logits and the matcher moved past it.
  double mask_us_mean = 0, mask_us_median = 0, mask_us_p90 = 0;
  double first_request_us_mean = 0;  // the schema's first request (its masks computed)
  double later_requests_us_mean = 0;
  int64_t mask_misses = 0, mask_hits = 0;
  double decode_step_ms = 0;  // median unconstrained batch-1 decode step
  double ratio = 0;           // mask_us_mean over the decode step
  std::string first_text;     // what the first request generated
  nlohmann::json ToJson() const;
};

// A nested schema like those applications send: objects in objects, arrays of objects, enums,
// a number, nullable fields and a $ref.
extern const char kNestedBenchSchema[];

Result<GrammarBenchResult> RunGrammarBench(const GrammarBenchOptions& options);

}  // namespace pdserve::bench
