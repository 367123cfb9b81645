// `pdserve profile calibrate`: a measured performance profile scaled to the steps workers
// logged while serving (`--step-log`), by model/profile_calibration.h.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "app/commands.h"
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
}

}  // namespace pdserve::app
