// A profile against this host's steps; see profile_check.h.
#include "bench/engine/profile_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pdserve::bench {

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Values of `wanted` within [1, limit] (limit <= 0: no limit), at least one: `limit` itself.
std::vector<int> Within(std::vector<int> wanted, int limit) {
  std::vector<int> out;
  for (int v : wanted) {
    if (limit <= 0 || v <= limit) out.push_back(v);
  }
  if (out.empty()) out.push_back(std::max(1, limit));
  return out;
}

bool Off(double ratio, double warn) { return ratio > 0 && std::abs(ratio - 1) > warn; }

}  // namespace

ProfileSweepOptions CheckSweep(const model::PerformanceProfile& profile, int repeats) {
  ProfileSweepOptions sweep;
  sweep.engine.device = profile.device.empty() ? "cpu" : profile.device;
  sweep.engine.dtype = profile.dtype.empty() ? "auto" : profile.dtype;
  sweep.engine.threads = profile.threads;
  sweep.engine.repeats = repeats;
  sweep.page_size = profile.page_size > 0 ? profile.page_size : 16;
  if (profile.max_batch_tokens > 0) sweep.max_batch_tokens = profile.max_batch_tokens;
  sweep.prompt_lens = Within({64, 256}, profile.range.prompt_tokens);
  sweep.batches = Within({1, 8}, profile.range.decode_tokens);
  sweep.contexts = Within({64}, profile.range.max_context);
  sweep.decode_steps = 4;
  sweep.repeats = repeats;
  return sweep;
}

ProfileCheck CompareProfiles(const model::PerformanceProfile& reference,
                             const model::PerformanceProfile& measured,
                             const ProfileSweepOptions& sweep) {
  ProfileCheck check;
  std::vector<double> prefill, decode;
  for (int tokens : sweep.prompt_lens) {
    model::StepShape shape;
    model::AddPromptChunk(shape, 0, tokens);
    ProfileCheckPoint p{"prefill", tokens, tokens, reference.StepSeconds(shape),
                        measured.StepSeconds(shape)};
    check.points.push_back(p);
    if (p.ratio() > 0) prefill.push_back(p.ratio());
  }
  for (int batch : sweep.batches) {
    for (int context : sweep.contexts) {
      model::StepShape shape;
      for (int i = 0; i < batch; ++i) model::AddDecodeToken(shape, context - 1);
      ProfileCheckPoint p{"decode", batch, context, reference.StepSeconds(shape),
                          measured.StepSeconds(shape)};
      check.points.push_back(p);
      if (p.ratio() > 0) decode.push_back(p.ratio());
    }
  }
  check.prefill_ratio = Median(prefill);
  check.decode_ratio = Median(decode);
  return check;
}

bool ProfileCheckWarns(const ProfileCheck& check, double warn) {
  return Off(check.prefill_ratio, warn) || Off(check.decode_ratio, warn);
}

std::string ProfileCheckReport(const model::PerformanceProfile& reference,
                               const ProfileCheck& check, double warn) {
  std::string out =
      fmt::format("profile {} ({}, {} on {}, dtype {}, {} thread(s)) against this host:\n",
                  reference.name, reference.model_id, reference.device, reference.device_name,
                  reference.dtype, reference.threads);
  out += fmt::format("  {:8} {:>7} {:>8} {:>12} {:>12} {:>8}\n", "step", "tokens", "context",
                     "profile ms", "here ms", "here/prof");
  for (const ProfileCheckPoint& p : check.points) {
    out += fmt::format("  {:8} {:>7} {:>8} {:>12.2f} {:>12.2f} {:>8.3f}\n", p.kind, p.tokens,
                       p.context, p.profile_seconds * 1e3, p.measured_seconds * 1e3, p.ratio());
  }
  out += fmt::format("  median here/profile: prefill {:.3f}, decode {:.3f}\n", check.prefill_ratio,
                     check.decode_ratio);
  for (const auto& [kind, ratio] : {std::pair<const char*, double>{"prefill", check.prefill_ratio},
                                    {"decode", check.decode_ratio}}) {
    if (Off(ratio, warn)) {
      out += fmt::format(
          "WARNING: this host's {} steps take {:.2f}x the profile's (more than {:.0f}% off): "
          "simulated workers, `pdserve capacity` and replays on this profile will be off by as "
          "much here; measure one on this host (pdserve bench engine --profile-out)\n",
          kind, ratio, warn * 100);
    }
  }
  return out;
}

}  // namespace pdserve::bench
