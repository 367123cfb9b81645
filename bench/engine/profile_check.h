// ProfileCheck: how a performance profile's step times compare with this host's, before anyone
// trusts `pdserve sim`, `pdserve capacity` or a replay on it (`pdserve profile check`). A profile
// is host-specific: it times one engine, with its device, dtype and thread count, on one machine.
// The check measures a few steps of each kind with the profile's own settings (MeasureProfile on
// a small sweep within the profile's range) and sets the profile's predicted step times against
// the fit of those steps. Pure comparison and text; the measuring is MeasureProfile's.
#pragma once

#include <string>
#include <vector>

#include "bench/engine/profile_sweep.h"
#include "model/performance_profile.h"

namespace pdserve::bench {

struct ProfileCheckPoint {
  std::string kind;  // "prefill" (a prompt of `tokens`) or "decode" (a batch of `tokens`)
  int tokens = 0;
  int context = 0;  // decode: each sequence's context
  double profile_seconds = 0, measured_seconds = 0;
  double ratio() const { return profile_seconds > 0 ? measured_seconds / profile_seconds : 0; }
};

struct ProfileCheck {
  std::vector<ProfileCheckPoint> points;
  // The median measured-over-profile ratio of each kind (0: no point of that kind).
  double prefill_ratio = 0, decode_ratio = 0;
};

// The sweep the check measures: the profile's device, dtype and threads, two prompt lengths and
// two batch sizes within its measured range, one context.
ProfileSweepOptions CheckSweep(const model::PerformanceProfile& profile, int repeats);
// Both profiles' step times at the sweep's shapes.
ProfileCheck CompareProfiles(const model::PerformanceProfile& reference,
                             const model::PerformanceProfile& measured,
                             const ProfileSweepOptions& sweep);
// A table of the points and each kind's median ratio, with a WARNING line for a kind whose
// ratio is off by more than `warn` (0.10: 10%).
std::string ProfileCheckReport(const model::PerformanceProfile& reference,
                               const ProfileCheck& check, double warn);
// Whether a kind's ratio is off by more than `warn`.
bool ProfileCheckWarns(const ProfileCheck& check, double warn);

}  // namespace pdserve::bench
