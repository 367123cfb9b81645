// CalibrateProfile: each kind's factor is the median of served over predicted step time, the
// calibrated profile predicts the served steps, a kind with too few steps stays as measured,
// mixed steps are left out, steps beyond the measured range are counted, and the decode
// worker's gap between decode steps in a row is their median, steps after a pause left out;
// each kind's spread holds its served steps' median and mean.
#include "model/profile_calibration.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pdserve::model {
namespace {

// A sweep's profile: a prefill step 10 ms + 0.1 ms a token (curve), a decode step of one 15 ms,
// of two 20 ms, of four 22 ms, plus 1 us a context token.
PerformanceProfile Measured() {
  PerformanceProfile p;
  p.name = "measured";
  p.prefill = {0.010, 1e-4, 0};
  p.prefill_curve.points = {{16, 0.0116}, {128, 0.0228}, {256, 0.0356}};
  p.decode = {0.014, 2e-3, 1e-6};
  p.decode_curve.points = {{1, 0.015}, {2, 0.020}, {4, 0.022}};
  p.decode_curve.per_context = 1e-6;
  p.range = {256, 4, 1024};
  return p;
}

StepSample Prompt(int tokens, double seconds) {
  StepSample s;
  AddPromptChunk(s.shape, 0, tokens);
  s.seconds = seconds;
  return s;
}

StepSample Decode(int batch, int position, double seconds) {
  StepSample s;
  for (int i = 0; i < batch; ++i) AddDecodeToken(s.shape, position);
  s.seconds = seconds;
  return s;
}

// As logged, with no gaps (a log written before them).
std::vector<LoggedStep> Logged(const std::vector<StepSample>& steps) {
  std::vector<LoggedStep> logged;
  for (const StepSample& s : steps) logged.push_back({s, -1});
  return logged;
}

TEST(ProfileCalibration, EachKindIsScaledByTheMedianOfServedOverPredicted) {
  const PerformanceProfile base = Measured();
  std::vector<StepSample> served;
  // Prompt steps 10% slower than measured, one an outlier (a step after a pause): the median
  // is not moved by it.
  for (int n : {20, 64, 128, 190, 200}) {
    StepSample s = Prompt(n, 0);
    s.seconds = 1.10 * base.StepSeconds(s.shape);
    served.push_back(s);
  }
  served.push_back(Prompt(128, 3 * 0.0228));
  // Decode steps 5% faster, at every batch measured.
  for (int b : {1, 2, 4, 2, 1}) {
    StepSample s = Decode(b, 200, 0);
    s.seconds = 0.95 * base.StepSeconds(s.shape);
    served.push_back(s);
  }
  auto c = CalibrateProfile(base, Logged(served));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_NEAR(c->prefill_factor, 1.10, 1e-9);
  EXPECT_NEAR(c->decode_factor, 0.95, 1e-9);
  EXPECT_EQ(c->prefill_steps, 6);
  EXPECT_EQ(c->decode_steps, 5);
  EXPECT_EQ(c->mixed_steps, 0);
  EXPECT_EQ(c->outside_range, 0);
  EXPECT_NEAR(c->prefill_error_before, 0.10 / 1.10, 1e-9);
  EXPECT_NEAR(c->prefill_error_after, 0, 1e-9);
  EXPECT_NEAR(c->decode_error_after, 0, 1e-9);
  // The calibrated profile predicts each served step of the common level, curves and linear
  // models alike, and keeps the measured shape.
  for (const StepSample& s : {Prompt(100, 0), Decode(3, 500, 0)}) {
    const double f = s.shape.prompt_tokens > 0 ? 1.10 : 0.95;
    EXPECT_NEAR(c->profile.StepSeconds(s.shape), f * base.StepSeconds(s.shape), 1e-12);
  }
  EXPECT_NEAR(c->profile.prefill.per_token, 1.10 * base.prefill.per_token, 1e-15);
  EXPECT_NEAR(c->profile.decode.per_context, 0.95 * base.decode.per_context, 1e-15);
  EXPECT_EQ(c->profile.range.prompt_tokens, base.range.prompt_tokens);
  // The log had no gaps: none is measured.
  EXPECT_EQ(c->decode_gap_steps, 0);
  EXPECT_EQ(c->profile.decode_gap_seconds, 0);
  // The mean sees the outlier the median ignores.
  EXPECT_NEAR(c->prefill_mean_ratio, (5 * 1.10 + 3) / 6, 1e-9);
  EXPECT_NEAR(c->decode_mean_ratio, 0.95, 1e-9);
}

TEST(ProfileCalibration, TheDecodeGapIsTheMedianBetweenDecodeStepsInARow) {
  const PerformanceProfile base = Measured();
  std::vector<LoggedStep> served = {
      {Prompt(64, 0.02), -1},       // a log's first line: no gap
      {Decode(1, 64, 0.015), 0.5},  // after a prompt step: the worker may have waited
      {Decode(1, 65, 0.015), 0.003}, {Decode(2, 66, 0.020), 0.004},
      {Decode(2, 67, 0.020), 0.002}, {Decode(2, 68, 0.020), 0.9},  // a pause the median leaves out
      {Prompt(32, 0.015), 0.001},                                  // not a decode step
  };
  auto c = CalibrateProfile(base, served, 3);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->decode_gap_steps, 4);
  EXPECT_NEAR(c->decode_gap_seconds, (0.003 + 0.004) / 2, 1e-12);
  EXPECT_NEAR(c->profile.decode_gap_seconds, c->decode_gap_seconds, 1e-12);
  // With fewer gaps than min_steps, the base's gap is kept.
  PerformanceProfile gapped = base;
  gapped.decode_gap_seconds = 0.001;
  auto few = CalibrateProfile(gapped, served, 5);
  ASSERT_TRUE(few.ok()) << few.status().ToString();
  EXPECT_EQ(few->decode_gap_seconds, 0);
  EXPECT_EQ(few->profile.decode_gap_seconds, 0.001);
}

// The spread: a served step's time over the calibrated prediction, as twenty quantiles whose
// draws have the served steps' median and mean, so a simulated worker's queue and a token's mean
// time see the served tail.
TEST(ProfileCalibration, TheSpreadHoldsTheServedStepsMedianAndMean) {
  const PerformanceProfile base = Measured();
  std::vector<StepSample> served;
  // Decode steps at 1.0 to 1.4 of the prediction, one in ten 2x (a neighbour took the core).
  for (int i = 0; i < 200; ++i) {
    StepSample s = Decode(2, 100, 0);
    const double ratio = i % 10 == 9 ? 2.0 : 1.0 + 0.4 * (i % 9) / 8;
    s.seconds = ratio * base.StepSeconds(s.shape);
    served.push_back(s);
  }
  auto c = CalibrateProfile(base, Logged(served), 20);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<double>& spread = c->profile.decode_spread;
  ASSERT_EQ(spread.size(), 20u);
  EXPECT_TRUE(std::is_sorted(spread.begin(), spread.end()));
  EXPECT_TRUE(c->profile.prefill_spread.empty()) << "no prompt steps: none";
  // Drawn over a fine grid of probabilities: the median near 1 (the factor holds the median),
  // the mean the served mean's over the factor, the top tenth the slow steps.
  std::vector<double> draws;
  for (int i = 0; i < 10000; ++i) draws.push_back(SpreadFactor(spread, (i + 0.5) / 10000));
  double sum = 0;
  for (double d : draws) sum += d;
  EXPECT_NEAR(draws[5000], 1.0, 0.02);
  EXPECT_NEAR(sum / draws.size() * c->decode_factor, c->decode_mean_ratio, 0.02);
  EXPECT_GT(c->decode_mean_ratio, c->decode_factor + 0.05);
  EXPECT_NEAR(draws[9900] * c->decode_factor, 2.0, 1e-9);
  EXPECT_NEAR(draws[50] * c->decode_factor, 1.0, 1e-9);
  // It survives the file (with the pages a file must name).
  PerformanceProfile saved = c->profile;
  saved.kv_pages = 64;
  auto back = PerformanceProfile::FromJson(saved.ToJson(), "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->decode_spread, spread);
}

TEST(ProfileCalibration, AKindWithTooFewStepsStaysAsMeasuredAndMixedStepsAreLeftOut) {
  const PerformanceProfile base = Measured();
  std::vector<StepSample> served;
  const double one = base.StepSeconds(Decode(1, 100, 0).shape);
  for (int i = 0; i < 4; ++i) served.push_back(Decode(1, 100, 2 * one));
  served.push_back(Prompt(64, 5.0));  // one prompt step: too few to scale prefill by
  StepSample mixed = Prompt(32, 9.0);
  AddDecodeToken(mixed.shape, 40);
  served.push_back(mixed);
  served.push_back(Decode(16, 2000, 2 * base.StepSeconds(Decode(16, 2000, 0).shape)));
  auto c = CalibrateProfile(base, Logged(served), /*min_steps=*/3);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->prefill_factor, 1);
  EXPECT_NEAR(c->decode_factor, 2, 1e-9);
  EXPECT_EQ(c->prefill_steps, 1);
  EXPECT_EQ(c->decode_steps, 5);
  EXPECT_EQ(c->mixed_steps, 1);
  EXPECT_EQ(c->outside_range, 1);  // the batch of 16 at 2,000 tokens of context
  EXPECT_DOUBLE_EQ(c->profile.StepSeconds(Prompt(64, 0).shape),
                   base.StepSeconds(Prompt(64, 0).shape));
}

TEST(ProfileCalibration, TooFewStepsOfEitherKindAreRefused) {
  const PerformanceProfile base = Measured();
  auto c = CalibrateProfile(base, Logged({Prompt(64, 0.02), Decode(1, 10, 0.015)}), 3);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("1 prompt-only and 1 decode-only steps"), std::string::npos)
      << c.status().message();
  EXPECT_FALSE(CalibrateProfile(base, {}, 0).ok());
}

}  // namespace
}  // namespace pdserve::model
