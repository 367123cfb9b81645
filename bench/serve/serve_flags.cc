#include "bench/serve/serve_flags.h"

#include <unistd.h>

#include <cmath>

namespace pdserve::bench {

void AddServeFlags(CLI::App& cmd, ServeConfig& c, ServeOutputs& out) {
  cmd.add_option("--base-url", c.base_url, "Server to load, http[s]://HOST[:PORT][/PREFIX]")
      ->capture_default_str();
  cmd.add_option("--endpoint", c.endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  cmd.add_option("--model", c.model, "Model name sent in each request")->required();
  cmd.add_option("--api-key-env", c.api_key_env,
                 "Environment variable holding the API key (sent as a Bearer token if set)")
      ->capture_default_str();
  cmd.add_option("--label", c.label, "Free text carried into the results");
  cmd.add_option("--ca-cert", c.tls_ca_file, "https: CA bundle (PEM) instead of the system's");
  cmd.add_flag("--insecure", out.insecure, "https: skip certificate and host name checks");

  cmd.add_option("--dataset-name", c.dataset_name, "random, sharegpt, jsonl, mooncake, multi-turn")
      ->check(CLI::IsMember({"random", "sharegpt", "jsonl", "mooncake", "multi-turn"}))
      ->capture_default_str();
  cmd.add_option("--dataset-path", c.dataset_path, "ShareGPT JSON, JSONL or Mooncake-trace file");
  cmd.add_option("--dataset", c.dataset,
                 "random, multi-turn, or a file: ShareGPT JSON, JSONL prompts or a Mooncake trace "
                 "(told apart by content); overrides --dataset-name/--dataset-path");
  cmd.add_option("--num-prompts", c.num_prompts,
                 "Requests per run (multi-turn: turns in all, unless --num-conversations; a "
                 "Mooncake trace: its first lines)")
      ->capture_default_str();
  cmd.add_option("--random-input-len", c.random_input_len,
                 "Mean prompt length in tokens (fitted with --tokenizer; else words ~ tokens)")
      ->capture_default_str();
  cmd.add_option("--random-output-len", c.random_output_len,
                 "Mean max_tokens (also for JSONL prompts that set none)")
      ->capture_default_str();
  cmd.add_option("--random-range-ratio", c.random_range_ratio,
                 "Lengths uniform in [len*(1-r), len*(1+r)], 0 <= r < 1")
      ->capture_default_str();
  cmd.add_option("--sharegpt-output-len", c.sharegpt_output_len,
                 "Fixed max_tokens for ShareGPT (default: the reply's length)");
  cmd.add_option("--sharegpt-turns", c.sharegpt_turns,
                 "ShareGPT: first (one request per conversation) or all (replay every human turn "
                 "as a multi-turn conversation, the server answering)")
      ->check(CLI::IsMember({"first", "all"}))
      ->capture_default_str();
  cmd.add_option("--num-conversations", c.num_conversations,
                 "Multi-turn: conversations (0: enough for --num-prompts turns)")
      ->capture_default_str();
  cmd.add_option("--turns", c.turns,
                 "Multi-turn: turns per conversation (ShareGPT replay: at most this many)")
      ->capture_default_str();
  cmd.add_option("--system-prompt-len", c.system_prompt_len,
                 "Multi-turn: tokens of the system prompt every conversation shares (0: none)")
      ->capture_default_str();
  cmd.add_option("--user-turn-len", c.user_turn_len, "Multi-turn: tokens per user turn")
      ->capture_default_str();
  cmd.add_option("--output-len", c.output_len,
                 "max_tokens of each answer (multi-turn; 0: --random-output-len), or in place of "
                 "the recorded length (ShareGPT, Mooncake; 0: recorded)")
      ->capture_default_str();
  cmd.add_option("--trace-time-scale", c.trace_time_scale,
                 "Mooncake trace: send at timestamp x scale (0.5: twice as fast)")
      ->capture_default_str();
  cmd.add_flag("--ignore-eos", c.ignore_eos,
               "Send ignore_eos: true (always on for random data, as vLLM does)");
  cmd.add_option("--extra-body", c.extra_body, "JSON object merged into every request body");
  cmd.add_option("--tokenizer", c.tokenizer_path,
                 "tokenizer.json (or model folder) to count tokens when the server reports none");

  cmd.add_option("--request-rate", c.request_rate,
                 "Requests (multi-turn: conversations) per second, or inf for all at once")
      ->capture_default_str();
  cmd.add_option("--burstiness", c.burstiness,
                 "Gamma shape of the gaps between requests: 1 = Poisson, <1 burstier")
      ->capture_default_str();
  cmd.add_option("--max-concurrency", c.max_concurrency,
                 "Requests (multi-turn: conversations) in flight at most (0: no limit)")
      ->capture_default_str();
  cmd.add_option("--seed", c.seed, "Seed of the data and the arrival schedule")
      ->capture_default_str();
  cmd.add_option("--sweep", c.sweep,
                 "Rates to run in turn, r1,r2,... (inf allowed), or 'saturation': double from "
                 "--sweep-start-rate until the server falls behind");
  cmd.add_option("--sweep-start-rate", c.sweep_start_rate, "First rate of a saturation sweep")
      ->capture_default_str();
  cmd.add_option("--sweep-max-steps", c.sweep_max_steps, "Most rates in a saturation sweep")
      ->capture_default_str();
  cmd.add_option("--saturation-ratio", c.saturation_ratio,
                 "Saturated when achieved req/s < ratio x offered")
      ->capture_default_str();
  cmd.add_option("--request-timeout", c.request_timeout_s, "Per-request deadline in seconds")
      ->capture_default_str();

  cmd.add_option("--metric-percentiles,--percentiles", c.percentiles,
                 "Percentiles to report, e.g. 50,90,99")
      ->capture_default_str();
  cmd.add_option("--goodput", c.goodput, "SLOs for goodput: ttft:MS tpot:MS e2el:MS");

  cmd.add_option("--gpu-hour-price", c.gpu_hour_price,
                 "USD per GPU-hour of the serving side (enables cost figures)");
  cmd.add_option("--gpus", c.gpus, "GPUs serving the endpoint")->capture_default_str();

  cmd.add_option("--result-json", out.result_json, "Write the results as JSON (vLLM field names)");
  cmd.add_option("--result-csv", out.result_csv, "Write one CSV row per run");
  cmd.add_option("--result-html", out.result_html, "Write a self-contained HTML report");
  cmd.add_flag("--save-detailed", c.save_detailed, "Also save generated texts in the JSON");
  cmd.add_option("--progress", out.progress, "Progress on stderr: auto (on a terminal), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
}

void FinishServeFlags(ServeConfig& config, const ServeOutputs& outputs) {
  config.tls_verify = !outputs.insecure;
  config.progress = outputs.progress == "on" || (outputs.progress == "auto" && isatty(2) == 1);
}

}  // namespace pdserve::bench
