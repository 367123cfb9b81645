// `pdserve bench engine`: engine throughput, the batch-1 memory-bandwidth roofline and, on a GPU,
// prompt processing against the bf16 matrix rate.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "app/commands.h"
#include "bench/engine/engine_bench.h"
#include "bench/engine/profile_sweep.h"
#include "common/json_text.h"
#include "model/model_maker.h"

namespace pdserve::app {

void AddBenchEngineCommand(CLI::App& bench) {
  auto o = std::make_shared<bench::EngineBenchOptions>();
  auto model_dir = std::make_shared<std::string>();
  auto json_path = std::make_shared<std::string>();
  CLI::App* cmd = bench.add_subcommand("engine", "Prefill and decode tokens/s, and the roofline");
  cmd->add_option("--model", *model_dir, "Model directory (default: the built-in tiny model)");
  cmd->add_option("--batches", o->batches, "Batch sizes")->delimiter(',');
  cmd->add_option("--prompt-len", o->prompt_len, "Prompt tokens per sequence")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--decode-steps", o->decode_steps, "Timed decode steps")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--repeats", o->repeats, "Runs per batch size; the median is reported")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--threads", o->threads, "CPU threads (0: all)");
  cmd->add_option("--device", o->device, "cpu, or cuda:N for GPU N (builds with CUDA)");
  AddDtypeOption(*cmd, o->dtype);
  cmd->add_option("--compare-dtype", o->compare_dtype,
                  "Also time batch-1 decode with the matrices in this dtype, in runs paired with "
                  "the first engine's (cpu)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  cmd->add_option("--random-shape", o->random_shape,
                  "No model directory: random bf16 weights of this make-model preset's shape, "
                  "made in GPU memory (needs --device cuda:N)")
      ->check(CLI::IsMember(model::PresetNames()));
  cmd->add_option("--json", *json_path, "Also write the figures to this JSON file");
  auto sweep = std::make_shared<bench::ProfileSweepOptions>();
  auto profile_out = std::make_shared<std::string>();
  cmd->add_option("--profile-out", *profile_out,
                  "Instead of the throughput figures: measure a performance profile (step times "
                  "over a sweep of prompt lengths, batch sizes and contexts, fitted) and write it "
                  "here, for --device sim:FILE and pdserve sim");
  cmd->add_option("--kv-memory-mb", sweep->kv_memory_mb,
                  "--profile-out: the worker's KV pool, for the profile's page count");
  cmd->add_option("--max-batch-tokens", sweep->max_batch_tokens,
                  "--profile-out: the worker's tokens per step")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--kv-gbps", sweep->kv_gbps,
                  "--profile-out: KV bandwidth between a prefill and a decode worker, measured "
                  "elsewhere (pdserve bench kv); 0: transfers take no time")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--profile-prompt-lens", sweep->prompt_lens,
                  "--profile-out: prompt lengths of the prompt-only steps")
      ->delimiter(',');
  cmd->add_option("--profile-batches", sweep->batches,
                  "--profile-out: batch sizes of the decode steps")
      ->delimiter(',');
  cmd->add_option("--profile-contexts", sweep->contexts,
                  "--profile-out: contexts (prompt tokens) of the decode steps")
      ->delimiter(',');
  cmd->add_option("--kv-gbps-source", sweep->kv_gbps_source,
                  "--profile-out: where the --kv-gbps figure comes from (recorded)");
  cmd->callback([o, model_dir, json_path, sweep, profile_out] {
    std::string dir = *model_dir;
    if (dir.empty() && o->random_shape.empty()) {
      auto builtin = model::EnsureBuiltinModel();
      if (!builtin.ok()) Fail("bench engine", builtin.status());
      dir = *builtin;
    }
    if (!profile_out->empty()) {
      sweep->engine = *o;
      sweep->repeats = o->repeats;
      sweep->command = fmt::format(
          "pdserve bench engine {} --device {} --threads {} --dtype {} --repeats {} "
          "--kv-memory-mb {} --max-batch-tokens {} --profile-prompt-lens {} --profile-batches {} "
          "--profile-contexts {} --kv-gbps {} --profile-out {}",
          o->random_shape.empty() ? "--model " + dir : "--random-shape " + o->random_shape,
          o->device, o->threads, o->dtype, o->repeats, sweep->kv_memory_mb, sweep->max_batch_tokens,
          fmt::join(sweep->prompt_lens, ","), fmt::join(sweep->batches, ","),
          fmt::join(sweep->contexts, ","), sweep->kv_gbps, *profile_out);
      auto profile = bench::MeasureProfile(dir, *sweep);
      if (!profile.ok()) Fail("bench engine", profile.status());
      profile->name = std::filesystem::path(*profile_out).stem().string();
      ExitOnError("bench engine", profile->Save(*profile_out));
      std::cout << bench::ProfileSummary(*profile);
      return;
    }
    auto result = bench::RunEngineBench(dir, *o);
    if (!result.ok()) Fail("bench engine", result.status());
    std::cout << result->ToTable();
    if (!json_path->empty()) {
      std::ofstream out(*json_path);
      out << DumpJson(result->ToJson(), 2) << "\n";
      if (!out.flush()) Fail("bench engine", Unavailable("cannot write " + *json_path));
    }
  });
}

}  // namespace pdserve::app
