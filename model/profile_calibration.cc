#include "model/profile_calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/percentile.h"

namespace pdserve::model {
namespace {

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

// Each step's time over `profile`'s prediction, ascending.
std::vector<double> SortedRatios(const PerformanceProfile& profile,
                                 const std::vector<StepSample>& steps) {
  std::vector<double> ratios;
  for (const StepSample& s : steps) {
    const double predicted = profile.StepSeconds(s.shape);
    if (predicted > 0) ratios.push_back(s.seconds / predicted);
  }
  std::sort(ratios.begin(), ratios.end());
  return ratios;
}

double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// The quantiles of `sorted` ratios over `factor` at probabilities (i + 0.5) / kSpreadPoints.
constexpr int kSpreadPoints = 20;

std::vector<double> Spread(const std::vector<double>& sorted, double factor) {
  std::vector<double> spread;
  for (int i = 0; i < kSpreadPoints; ++i) {
    spread.push_back(QuantileOfSorted(sorted, (i + 0.5) / kSpreadPoints) / factor);
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
  // Each kind with min_steps steps gets its median factor and its spread; another stays as
  // measured.
  const std::vector<double> prefill_ratios = SortedRatios(base, prefill);
  const std::vector<double> decode_ratios = SortedRatios(base, decode);
  const bool fit_prefill = c.prefill_steps >= min_steps && !prefill_ratios.empty();
  const bool fit_decode = c.decode_steps >= min_steps && !decode_ratios.empty();
  if (fit_prefill) c.prefill_factor = QuantileOfSorted(prefill_ratios, 0.5);
  if (fit_decode) c.decode_factor = QuantileOfSorted(decode_ratios, 0.5);
  c.profile = ScaleStepTimes(base, c.prefill_factor, c.decode_factor);
  if (fit_prefill) c.profile.prefill_spread = Spread(prefill_ratios, c.prefill_factor);
  if (fit_decode) c.profile.decode_spread = Spread(decode_ratios, c.decode_factor);
  c.decode_gap_steps = static_cast<int>(gaps.size());
  if (c.decode_gap_steps >= min_steps) {
    c.decode_gap_seconds = Median(gaps);
    c.profile.decode_gap_seconds = c.decode_gap_seconds;
  }
  c.prefill_mean_ratio = Mean(prefill_ratios);
  c.decode_mean_ratio = Mean(decode_ratios);
  c.prefill_error_before = MedianError(base, prefill);
  c.prefill_error_after = MedianError(c.profile, prefill);
  c.decode_error_before = MedianError(base, decode);
  c.decode_error_after = MedianError(c.profile, decode);
  return c;
}

}  // namespace pdserve::model
