// `pdserve profile calibrate`: a measured performance profile scaled to the steps workers
// logged while serving (`--step-log`), by model/profile_calibration.h. `pdserve profile check`:
// a profile's step times against a few steps measured on this host with the profile's own
// device, dtype and threads (bench/engine/profile_check.h).
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>

#include "app/commands.h"
#include "bench/engine/profile_check.h"
#include "model/model_maker.h"
#include "model/profile_calibration.h"
#include "model/step_log.h"

namespace pdserve::app {

namespace {

struct CalibrateFlags {
  std::string profile;
  std::vector<std::string> steps;
  std::string out;
  int min_steps = 20;
};

void RunCalibrate(const CalibrateFlags& f) {
  const char* command = "profile calibrate";
  auto base = model::FindProfile(f.profile);
  if (!base.ok()) Fail(command, base.status());
  std::vector<model::LoggedStep> steps;
  for (const std::string& path : f.steps) {
    auto logged = model::ReadStepLog(path);
    if (!logged.ok()) Fail(command, logged.status());
    steps.insert(steps.end(), logged->begin(), logged->end());
  }
  auto c = model::CalibrateProfile(*base, steps, f.min_steps);
  if (!c.ok()) Fail(command, c.status());
  std::string invocation = "pdserve profile calibrate --profile " + f.profile;
  for (const std::string& path : f.steps) invocation += " --steps " + path;
  invocation += " --out " + f.out;
  c->profile.name = std::filesystem::path(f.out).stem().string();
  c->profile.command = fmt::format(
      "{}; step times scaled to {} prompt and {} decode steps served: prefill x{:.4f}, decode "
      "x{:.4f}, decode gap {:.2f} ms ({})",
      base->command, c->prefill_steps, c->decode_steps, c->prefill_factor, c->decode_factor,
      c->profile.decode_gap_seconds * 1e3, invocation);
  ExitOnError(command, c->profile.Save(f.out));
  auto kind = [](const char* name, int n, double factor, double mean, double before, double after,
                 const std::vector<double>& spread) {
    return n == 0 ? fmt::format("  {:8} no steps: kept as measured\n", name)
                  : fmt::format(
                        "  {:8} {:5} steps: x{:.3f} (mean x{:.3f}); median error {:.1f}% "
                        "-> {:.1f}%; spread p10 x{:.3f} p90 x{:.3f}\n",
                        name, n, factor, mean, before * 100, after * 100,
                        model::SpreadFactor(spread, 0.1), model::SpreadFactor(spread, 0.9));
  };
  const std::string gap =
      c->decode_gap_steps > 0 && c->decode_gap_seconds > 0
          ? fmt::format("  decode gap {:.2f} ms (median of {} between decode steps in a row)\n",
                        c->decode_gap_seconds * 1e3, c->decode_gap_steps)
          : fmt::format("  decode gap {:.2f} ms: kept ({} between decode steps in a row)\n",
                        c->profile.decode_gap_seconds * 1e3, c->decode_gap_steps);
  std::cout << fmt::format(
                   "{} calibrated to {} served step(s) ({} mixed, left out; {} beyond "
                   "its measured range) -> {}\n",
                   base->name, steps.size(), c->mixed_steps, c->outside_range, f.out)
            << kind("prefill", c->prefill_steps, c->prefill_factor, c->prefill_mean_ratio,
                    c->prefill_error_before, c->prefill_error_after, c->profile.prefill_spread)
            << kind("decode", c->decode_steps, c->decode_factor, c->decode_mean_ratio,
                    c->decode_error_before, c->decode_error_after, c->profile.decode_spread)
            << gap;
}

struct CheckFlags {
  std::string profile;
  std::string model;
  int repeats = 2;
  double warn = 0.10;
  bool strict = false;
};

void RunCheck(const CheckFlags& f) {
  const char* command = "profile check";
  auto profile = model::FindProfile(f.profile);
  if (!profile.ok()) Fail(command, profile.status());
  std::string model_dir = f.model;
  std::filesystem::path made;
  if (model_dir.empty()) {
    const auto& presets = model::PresetNames();
    if (std::find(presets.begin(), presets.end(), profile->model_id) == presets.end()) {
      Fail(command, InvalidArgument("the profile's model '" + profile->model_id +
                                    "' is not a make-model preset: pass --model DIR, the model "
                                    "the profile was measured on"));
    }
    made = std::filesystem::temp_directory_path() /
           fmt::format("pdserve-profile-check-{}-{}", profile->model_id, ::getpid());
    model::MakeModelOptions options;
    options.preset = profile->model_id;
    options.out_dir = made.string();
    ExitOnError(command, model::MakeModel(options));
    model_dir = made.string();
  }
  const bench::ProfileSweepOptions sweep = bench::CheckSweep(*profile, f.repeats);
  std::cerr << fmt::format(
      "profile check: measuring {} prompt lengths and {} batch sizes on {} (dtype {}, {} "
      "thread(s)), as the profile recorded\n",
      sweep.prompt_lens.size(), sweep.batches.size(), sweep.engine.device, sweep.engine.dtype,
      sweep.engine.threads == 0 ? std::string("all") : std::to_string(sweep.engine.threads));
  auto measured = bench::MeasureProfile(model_dir, sweep);
  if (!made.empty()) std::filesystem::remove_all(made);
  if (!measured.ok()) Fail(command, measured.status());
  const bench::ProfileCheck check = bench::CompareProfiles(*profile, *measured, sweep);
  std::cout << bench::ProfileCheckReport(*profile, check, f.warn);
  if (f.strict && bench::ProfileCheckWarns(check, f.warn)) std::exit(1);
}

}  // namespace

void AddProfileCommands(CLI::App& app) {
  CLI::App* group = app.add_subcommand("profile", "Work with performance profiles");
  group->require_subcommand(1);
  auto f = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = group->add_subcommand(
      "calibrate",
      "Scale a measured profile's prompt and decode step times to the steps workers logged "
      "while serving (their --step-log): each by the median of served time over predicted");
  cmd->add_option("--profile", f->profile, "The measured profile: a file or a name in profiles/")
      ->required();
  cmd->add_option("--steps", f->steps, "A worker's step log (repeat for several workers)")
      ->required();
  cmd->add_option("--out", f->out, "Where to write the calibrated profile")->required();
  cmd->add_option("--min-steps", f->min_steps,
                  "Fewest steps of a kind to scale it by (fewer: that kind stays as measured)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->callback([f] { RunCalibrate(*f); });

  auto c = std::make_shared<CheckFlags>();
  CLI::App* check = group->add_subcommand(
      "check",
      "Measure a few steps on this host with the profile's device, dtype and threads, and print "
      "the ratio of their times to the profile's, with a warning past --warn");
  check->add_option("--profile", c->profile, "The profile: a file or a name in profiles/")
      ->required();
  check->add_option("--model", c->model,
                    "The model the profile was measured on (default: the make-model preset of "
                    "its model id)");
  check->add_option("--repeats", c->repeats, "Runs of each step shape (their median)")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  check->add_option("--warn", c->warn, "Warn when a kind of step is off by more than this")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  check->add_flag("--strict", c->strict, "Exit 1 when it warns");
  check->callback([c] { RunCheck(*c); });
}

}  // namespace pdserve::app
