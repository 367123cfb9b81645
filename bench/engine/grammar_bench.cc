#include "bench/engine/grammar_bench.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <vector>

#include "common/percentile.h"
#include "grammar/json_grammar.h"
#include "grammar/token_constraint.h"
#include "model/engine.h"
#include "model/sampler.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::bench {

const char kNestedBenchSchema[] = R"({
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "customer": {"$ref": "#/$defs/person"},
    "status": {"enum": ["pending", "shipped", "delivered", "returned"]},
    "items": {"type": "array", "maxItems": 4, "items": {"type": "object", "properties": {
      "sku": {"type": "string"}, "quantity": {"type": "integer"}, "price": {"type": "number"},
      "gift": {"type": ["boolean", "null"]}},
      "required": ["sku", "quantity", "price", "gift"], "additionalProperties": false}},
    "shipping": {"type": "object", "properties": {
      "address": {"type": "string"}, "express": {"type": "boolean"},
      "notes": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
      "required": ["address", "express", "notes"], "additionalProperties": false}
  },
  "required": ["id", "customer", "status", "items", "shipping"],
  "additionalProperties": false,
  "$defs": {"person": {"type": "object", "properties": {
    "name": {"type": "string"}, "email": {"type": "string"}},
    "required": ["name", "email"], "additionalProperties": false}}
})";

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// The median unconstrained batch-1 decode step of the model, in ms.
Result<double> DecodeStepMs(const GrammarBenchOptions& o) {
  model::EngineOptions eo;
  eo.threads = o.threads;
  eo.kv_memory_mb = 256;
  PDSERVE_ASSIGN_OR_RETURN(auto engine, model::Engine::Load(o.model_dir, eo));
  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::vector<int32_t> prompt(128);
  for (auto& t : prompt)
    t = static_cast<int32_t>(rng() % static_cast<uint32_t>(engine->config().vocab_size));
  model::SamplingParams p;
  p.temperature = 0;
  p.ignore_eos = true;
  p.max_tokens = o.decode_steps + 2;
  PDSERVE_RETURN_IF_ERROR(engine->Add(prompt, p).status());
  std::vector<model::TokenEvent> events;
  PDSERVE_RETURN_IF_ERROR(engine->Step(&events));  // the prompt
  std::vector<double> steps;
  for (int i = 0; i < o.decode_steps && engine->HasWork(); ++i) {
    const auto start = Clock::now();
    PDSERVE_RETURN_IF_ERROR(engine->Step(&events));
    steps.push_back(Micros(Clock::now() - start) / 1000.0);
  }
  if (steps.empty()) return Internal("no decode step ran");
  return Median(steps);
}

}  // namespace

nlohmann::json GrammarBenchResult::ToJson() const {
  return {{"vocab_size", vocab_size},
          {"requests", requests},
          {"requests_complete", requests_complete},
          {"tokens", tokens},
          {"mask_us_mean", mask_us_mean},
          {"mask_us_median", mask_us_median},
          {"mask_us_p90", mask_us_p90},
          {"first_request_us_mean", first_request_us_mean},
          {"later_requests_us_mean", later_requests_us_mean},
          {"mask_misses", mask_misses},
          {"mask_hits", mask_hits},
          {"decode_step_ms", decode_step_ms},
          {"ratio", ratio},
          {"first_text", first_text}};
}

Result<GrammarBenchResult> RunGrammarBench(const GrammarBenchOptions& o) {
  if (o.requests < 1 || o.max_tokens < 1 || o.decode_steps < 1) {
    return InvalidArgument("requests, max_tokens and decode_steps must be >= 1");
  }
  GrammarBenchResult r;
  PDSERVE_ASSIGN_OR_RETURN(r.decode_step_ms, DecodeStepMs(o));

  PDSERVE_ASSIGN_OR_RETURN(auto tokenizer, tokenizer::Tokenizer::Load(o.vocabulary_dir));
  auto vocabulary = grammar::TokenVocabulary::FromTokenizer(*tokenizer, tokenizer->vocab_size());
  r.vocab_size = vocabulary->size();
  PDSERVE_ASSIGN_OR_RETURN(auto compiled, grammar::CompileJsonSchemaText(
                                              o.schema.empty() ? kNestedBenchSchema : o.schema));
  auto plan = std::make_shared<grammar::GrammarPlan>(compiled, vocabulary, o.cache_masks);
  const std::vector<int32_t>& ends = tokenizer->eos_ids();

  // Logits like a model's: a few tokens far above a broad mass. A fresh row each token.
  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(vocabulary->size()));
  std::vector<double> per_token, first, later;
  for (int q = 0; q < o.requests; ++q) {
    grammar::TokenConstraint constraint(plan);
    model::SamplingParams sp;
    sp.temperature = 1.0f;
    sp.seed = o.seed + static_cast<uint64_t>(q);
    model::Sampler sampler(sp);
    bool complete = false;
    std::vector<int32_t> text;
    for (int k = 0; k < o.max_tokens; ++k) {
      for (auto& x : logits) x = normal(rng);
      const auto start = Clock::now();
      constraint.Mask(logits, ends);
      const auto masked = Clock::now();
      const int32_t token = sampler.Sample(logits);
      const auto sampled = Clock::now();
      const bool end = std::find(ends.begin(), ends.end(), token) != ends.end();
      if (!end) {
        constraint.Accept(token);
        text.push_back(token);
      }
      const double us = Micros(masked - start) + Micros(Clock::now() - sampled);
      per_token.push_back(us);
      (q == 0 ? first : later).push_back(us);
      if (end || constraint.terminated()) {
        complete = true;
        break;
      }
    }
    r.requests_complete += complete ? 1 : 0;
    if (q == 0) r.first_text = tokenizer->Decode(text, /*skip_special=*/true);
  }
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? 0.0
                     : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  r.requests = o.requests;
  r.tokens = static_cast<int64_t>(per_token.size());
  r.mask_us_mean = mean(per_token);
  r.mask_us_median = Median(per_token);
  r.mask_us_p90 = Quantile(per_token, 0.9);
  r.first_request_us_mean = mean(first);
  r.later_requests_us_mean = mean(later);
  r.mask_misses = plan->mask_misses();
  r.mask_hits = plan->mask_hits();
  r.ratio = r.mask_us_mean / (r.decode_step_ms * 1000.0);
  return r;
}

}  // namespace pdserve::bench
