// `pdserve capacity`: what a cluster of workers with one performance profile can serve of a
// workload, by model/capacity_model.h (the throughput admission's goodput is measured against).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "model/capacity_model.h"

namespace pdserve::app {

namespace {

struct CapacityFlags {
  std::string profile;
  int prefill = 1, decode = 1;
  model::Workload workload{512, 128};
  model::WorkerLimits limits;
  double tpot_slo_ms = 0;
  bool json = false;
};

nlohmann::json ToJson(const model::WorkerCapacity& c) {
  return {{"requests_per_second", c.requests_per_second},
          {"batch", c.batch},
          {"step_seconds", c.step_seconds},
          {"limited_by", c.limited_by}};
}

void RunCapacity(const CapacityFlags& f) {
  auto profile = model::FindProfile(f.profile);
  if (!profile.ok()) Fail("capacity", profile.status());
  const model::ClusterCapacity c = model::PredictCapacity(*profile, f.workload, f.limits, f.prefill,
                                                          f.decode, f.tpot_slo_ms / 1000.0);
  if (f.json) {
    std::cout << nlohmann::json{{"profile", profile->name},
                                {"input_tokens", f.workload.input_tokens},
                                {"output_tokens", f.workload.output_tokens},
                                {"prefill_workers", f.prefill},
                                {"decode_workers", f.decode},
                                {"tpot_slo_ms", f.tpot_slo_ms},
                                {"requests_per_second", c.requests_per_second},
                                {"bottleneck", c.bottleneck},
                                {"prefill_worker", ToJson(c.prefill)},
                                {"decode_worker", ToJson(c.decode)}}
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << fmt::format(
      "{} prefill and {} decode worker(s) of profile '{}', {} prompt and {} output tokens:\n"
      "  {:.2f} requests/s, bound by {}\n"
      "  a prefill worker: {:.2f} req/s, {} prompt(s) a step of {:.1f} ms ({})\n"
      "  a decode worker:  {:.2f} req/s, {} sequence(s) a step of {:.1f} ms ({})\n",
      f.prefill, f.decode, profile->name, f.workload.input_tokens, f.workload.output_tokens,
      c.requests_per_second, c.bottleneck, c.prefill.requests_per_second, c.prefill.batch,
      c.prefill.step_seconds * 1e3, c.prefill.limited_by, c.decode.requests_per_second,
      c.decode.batch, c.decode.step_seconds * 1e3, c.decode.limited_by);
}

}  // namespace

void AddCapacityCommand(CLI::App& app) {
  auto f = std::make_shared<CapacityFlags>();
  CLI::App* cmd = app.add_subcommand(
      "capacity", "Requests/s a pool of workers of one performance profile can serve");
  cmd->add_option("--profile", f->profile, "A profile file, a name in profiles/, or 'zero'")
      ->required();
  cmd->add_option("--prefill", f->prefill, "Prefill workers")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--decode", f->decode, "Decode workers")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--input-len", f->workload.input_tokens, "Prompt tokens per request")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--output-len", f->workload.output_tokens, "Output tokens per request")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--tpot-slo-ms", f->tpot_slo_ms,
                  "Largest decode step allowed (0: none): bounds the decode batch")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--num-pages", f->limits.kv_pages, "KV pages per worker (0: the profile's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--page-size", f->limits.page_size, "Tokens per KV page (0: the profile's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-batch-tokens", f->limits.max_batch_tokens,
                  "Tokens per prefill step (0: the profile's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-running", f->limits.max_running, "Sequences in a decode batch at once")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([f] { RunCapacity(*f); });
}

}  // namespace pdserve::app
