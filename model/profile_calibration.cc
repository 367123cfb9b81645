#include "model/profile_calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pdserve::model {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void Scale(LinearStepModel& m, double f) {
  m.base *= f;
  m.per_token *= f;
  m.per_context *= f;
}

void Scale(MeasuredCurve& c, double f) {
  for (auto& [x, seconds] : c.points) seconds *= f;
  c.per_context *= f;
}

// Median relative error of `profile` over `steps`.
double MedianError(const PerformanceProfile& profile, const std::vector<StepSample>& steps) {
  std::vector<double> errors;
  for (const StepSample& s : steps) {
    errors.push_back(std::fabs(profile.StepSeconds(s.shape) - s.seconds) / s.seconds);
  }
  return Median(errors);
}

// Each step's time over `profile`'s prediction.
std::vector<double> Ratios(const PerformanceProfile& profile,
                           const std::vector<StepSample>& steps) {
  std::vector<double> ratios;
  for (const StepSample& s : steps) {
    const double predicted = profile.StepSeconds(s.shape);
    if (predicted > 0) ratios.push_back(s.seconds / predicted);
  }
  return ratios;
}

// The median of Ratios; 1 with fewer than `min_steps` steps.
double Factor(const PerformanceProfile& profile, const std::vector<StepSample>& steps,
              int min_steps) {
  if (static_cast<int>(steps.size()) < min_steps) return 1;
  const std::vector<double> ratios = Ratios(profile, steps);
  return ratios.empty() ? 1 : Median(ratios);
}

double MeanRatio(const PerformanceProfile& profile, const std::vector<StepSample>& steps) {
  const std::vector<double> ratios = Ratios(profile, steps);
  double sum = 0;
  for (double r : ratios) sum += r;
  return ratios.empty() ? 0 : sum / static_cast<double>(ratios.size());
}

// The quantiles of `ratios` over `factor` at probabilities (i + 0.5) / kSpreadPoints, each
// between the two sorted ratios around it.
constexpr int kSpreadPoints = 20;

std::vector<double> Spread(std::vector<double> ratios, double factor) {
  std::sort(ratios.begin(), ratios.end());
  std::vector<double> spread;
  if (ratios.empty() || !(factor > 0)) return spread;
  const double last = static_cast<double>(ratios.size() - 1);
  for (int i = 0; i < kSpreadPoints; ++i) {
    const double at = (i + 0.5) / kSpreadPoints * last;
    const auto lo = static_cast<size_t>(at);
    const size_t hi = std::min(lo + 1, ratios.size() - 1);
    const double q = ratios[lo] + (at - static_cast<double>(lo)) * (ratios[hi] - ratios[lo]);
    spread.push_back(q / factor);
  }
  return spread;
}

}  // namespace

PerformanceProfile ScaleStepTimes(const PerformanceProfile& profile, double prefill,
                                  double decode) {
  PerformanceProfile p = profile;
  Scale(p.prefill, prefill);
  Scale(p.prefill_curve, prefill);
  Scale(p.decode, decode);
  Scale(p.decode_curve, decode);
  return p;
}

Result<ProfileCalibration> CalibrateProfile(const PerformanceProfile& base,
                                            const std::vector<LoggedStep>& steps, int min_steps) {
  if (min_steps < 1) return InvalidArgument("min_steps must be at least 1");
  ProfileCalibration c;
  std::vector<StepSample> prefill, decode;
  std::vector<double> gaps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepSample& s = steps[i].step;
    const bool prompt = s.shape.prompt_tokens > 0, decoding = s.shape.decode_tokens > 0;
    if (prompt && decoding) {
      ++c.mixed_steps;
      continue;
    }
    if (!prompt && !decoding) continue;  // an empty step has no time to predict
    (prompt ? prefill : decode).push_back(s);
    // Its sequences went on from the step before (a first line's gap is -1: none before it).
    if (decoding && steps[i].gap_seconds >= 0 && i > 0 &&
        steps[i - 1].step.shape.decode_tokens > 0) {
      gaps.push_back(steps[i].gap_seconds);
    }
    if (!base.OutsideRange(s.shape).empty()) ++c.outside_range;
  }
  c.prefill_steps = static_cast<int>(prefill.size());
  c.decode_steps = static_cast<int>(decode.size());
  if (c.prefill_steps < min_steps && c.decode_steps < min_steps) {
    return InvalidArgument(fmt::format(
        "{} prompt-only and {} decode-only steps ({} mixed, left out): a calibration needs at "
        "least {} of one kind",
        c.prefill_steps, c.decode_steps, c.mixed_steps, min_steps));
  }
  c.prefill_factor = Factor(base, prefill, min_steps);
  c.decode_factor = Factor(base, decode, min_steps);
  c.profile = ScaleStepTimes(base, c.prefill_factor, c.decode_factor);
  if (c.prefill_steps >= min_steps) {
    c.profile.prefill_spread = Spread(Ratios(base, prefill), c.prefill_factor);
  }
  if (c.decode_steps >= min_steps) {
    c.profile.decode_spread = Spread(Ratios(base, decode), c.decode_factor);
  }
  c.decode_gap_steps = static_cast<int>(gaps.size());
  if (c.decode_gap_steps >= min_steps) {
    c.decode_gap_seconds = Median(gaps);
    c.profile.decode_gap_seconds = c.decode_gap_seconds;
  }
  c.prefill_mean_ratio = MeanRatio(base, prefill);
  c.decode_mean_ratio = MeanRatio(base, decode);
  c.prefill_error_before = MedianError(base, prefill);
  c.prefill_error_after = MedianError(c.profile, prefill);
  c.decode_error_before = MedianError(base, decode);
  c.decode_error_after = MedianError(c.profile, decode);
  return c;
}

}  // namespace pdserve::model
