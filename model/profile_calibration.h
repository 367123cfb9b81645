// CalibrateProfile: a measured performance profile (model/performance_profile.h) scaled to the
// steps a worker ran while serving (model/step_log.h), one factor for prompt steps and one for
// decode steps: each the median, over the served steps of its kind, of the step's time over the
// profile's prediction for its shape. The profile's shape (how time grows with prompt length,
// batch and context, measured over a controlled sweep) is kept; its level becomes the one the
// workers showed in service, where the sweep cannot see what serving adds to a step (a prefill
// worker's KV push inside it, a step after an idle second) or how fast the machine was then.
// Two numbers from any number of steps: the steps' own times are not replayed. Beside them, how
// each kind's steps spread about the scaled prediction (PerformanceProfile::prefill_spread and
// decode_spread, twenty quantiles of served over predicted time over the factor), so that a
// simulated worker's steps have the served mean and tail, not only the median; and, where the
// log has it, the decode worker's median time between two decode steps in a row
// (PerformanceProfile::decode_gap_seconds), which a token's time holds beside its step's.
// `pdserve profile calibrate` runs it; `scripts/sim-validity` simulates on both profiles.
#pragma once

#include <vector>

#include "common/status.h"
#include "model/performance_profile.h"
#include "model/step_log.h"

namespace pdserve::model {

struct ProfileCalibration {
  // The base, its step times scaled by the factors below, with each kind's spread where that
  // kind had min_steps steps (else the base's).
  PerformanceProfile profile;
  double prefill_factor = 1;  // 1 when fewer than min_steps prompt-only steps were served
  double decode_factor = 1;   // 1 when fewer than min_steps decode-only steps were served
  int prefill_steps = 0;      // prompt-only steps used
  int decode_steps = 0;       // decode-only steps used
  int mixed_steps = 0;        // steps with both kinds of work: left out (they would blur both)
  int outside_range = 0;      // used steps beyond the base's measured range (extrapolated)
  // The median gap before a decode-only step that followed a step with decode work, over
  // decode_gap_steps such steps; 0 (and the base's gap kept) with fewer than min_steps.
  double decode_gap_seconds = 0;
  int decode_gap_steps = 0;
  // The mean of served over predicted time, beside the median that scales: where they part,
  // a few steps ran far slower than the rest (a neighbour took the core).
  double prefill_mean_ratio = 0, decode_mean_ratio = 0;
  // Median relative error of the profile's prediction over the used steps, before and after.
  double prefill_error_before = 0, prefill_error_after = 0;
  double decode_error_before = 0, decode_error_after = 0;
};

// InvalidArgument when neither kind has min_steps steps, or min_steps is below 1.
Result<ProfileCalibration> CalibrateProfile(const PerformanceProfile& base,
                                            const std::vector<LoggedStep>& steps,
                                            int min_steps = 3);

// The profile with every prompt step's time multiplied by `prefill` and every decode step's by
// `decode` (a mixed step's decode part by `decode`); both above 0.
PerformanceProfile ScaleStepTimes(const PerformanceProfile& profile, double prefill, double decode);

}  // namespace pdserve::model
