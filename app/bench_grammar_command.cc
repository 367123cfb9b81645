// `pdserve bench grammar`: the time a response format adds to each decode token (its mask and
// the matcher's advance, over a real tokenizer's vocabulary) against the model's unconstrained
// batch-1 decode step in the same run; fails when the ratio is above --max-ratio.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "bench/engine/grammar_bench.h"

namespace pdserve::app {

void AddBenchGrammarCommand(CLI::App& bench) {
  auto o = std::make_shared<bench::GrammarBenchOptions>();
  auto schema_file = std::make_shared<std::string>();
  auto json_path = std::make_shared<std::string>();
  auto max_ratio = std::make_shared<double>(0.05);
  auto no_cache = std::make_shared<bool>(false);
  CLI::App* cmd = bench.add_subcommand(
      "grammar", "A response format's mask time per token against an unconstrained decode step");
  cmd->add_option("--model", o->model_dir,
                  "Model directory whose batch-1 decode step is the yardstick (the small preset: "
                  "pdserve make-model --preset small)")
      ->required();
  cmd->add_option("--vocabulary", o->vocabulary_dir,
                  "tokenizer.json, or a directory holding it, whose vocabulary the masks cover "
                  "(Llama-3's 128k tokens, say)")
      ->required();
  cmd->add_option("--schema", *schema_file,
                  "A JSON Schema file (default: a nested order with a customer, items and "
                  "shipping)");
  cmd->add_option("--requests", o->requests, "Requests generated under the schema")
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens per request at most")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--decode-steps", o->decode_steps, "Timed unconstrained decode steps")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--threads", o->threads, "The engine's CPU threads (0: all)");
  cmd->add_option("--max-ratio", *max_ratio,
                  "Fail when the mean mask time per token is above this share of the decode "
                  "step")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-mask-cache", *no_cache,
                "Compute every mask by the vocabulary walk (a planted fault: the gate fails)");
  cmd->add_option("--json", *json_path, "Also write the figures to this JSON file");
  cmd->callback([o, schema_file, json_path, max_ratio, no_cache] {
    if (!schema_file->empty()) {
      std::ifstream in(*schema_file);
      if (!in) Fail("bench grammar", NotFound(*schema_file + ": cannot read the schema"));
      o->schema.assign(std::istreambuf_iterator<char>(in), {});
    }
    o->cache_masks = !*no_cache;
    auto result = bench::RunGrammarBench(*o);
    if (!result.ok()) Fail("bench grammar", result.status());
    const bench::GrammarBenchResult& r = *result;
    std::cout << fmt::format(
        "vocabulary: {} tokens; {} requests ({} whole JSON), {} tokens; masks computed {}, "
        "reused {}\n"
        "mask + advance per token: mean {:.1f} us, median {:.1f} us, p90 {:.1f} us (first "
        "request {:.1f} us, later {:.1f} us)\n"
        "unconstrained decode step (batch 1): {:.2f} ms\n"
        "mask time per token / decode step: {:.2f}% (at most {:.2f}%)\n",
        r.vocab_size, r.requests, r.requests_complete, r.tokens, r.mask_misses, r.mask_hits,
        r.mask_us_mean, r.mask_us_median, r.mask_us_p90, r.first_request_us_mean,
        r.later_requests_us_mean, r.decode_step_ms, 100 * r.ratio, 100 * *max_ratio);
    std::cout << "first request's text: " << r.first_text.substr(0, 300)
              << (r.first_text.size() > 300 ? "..." : "") << "\n";
    if (!json_path->empty()) std::ofstream(*json_path) << r.ToJson().dump(2) << "\n";
    if (r.ratio > *max_ratio) {
      Fail("bench grammar",
           FailedPrecondition(fmt::format("FAIL: masks cost {:.2f}% of a decode step, above "
                                          "{:.2f}%",
                                          100 * r.ratio, 100 * *max_ratio)));
    }
    std::cout << "PASS\n";
  });
}

}  // namespace pdserve::app
