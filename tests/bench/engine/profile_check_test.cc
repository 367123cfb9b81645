// A profile against this host's steps (bench/engine/profile_check.h): the sweep keeps the
// profile's device, dtype and threads and stays within its range; the ratios are the measured
// step times over the profile's at the sweep's shapes; a kind off by more than the limit warns.
#include "bench/engine/profile_check.h"

#include <gtest/gtest.h>

namespace pdserve::bench {
namespace {

model::PerformanceProfile Profile(double prefill_per_token, double decode_base) {
  model::PerformanceProfile p;
  p.name = "test";
  p.model_id = "small";
  p.device = "cpu";
  p.dtype = "bf16";
  p.threads = 1;
  p.prefill = {0.01, prefill_per_token, 0};
  p.decode = {decode_base, 0.001, 0};
  p.range = {128, 4, 512};
  return p;
}

TEST(ProfileCheckTest, TheSweepUsesTheProfilesSettingsWithinItsRange) {
  const ProfileSweepOptions sweep = CheckSweep(Profile(0.001, 0.02), 3);
  EXPECT_EQ(sweep.engine.device, "cpu");
  EXPECT_EQ(sweep.engine.dtype, "bf16");
  EXPECT_EQ(sweep.engine.threads, 1);
  EXPECT_EQ(sweep.prompt_lens, std::vector<int>{64}) << "256 lies beyond the profile's 128";
  EXPECT_EQ(sweep.batches, std::vector<int>{1}) << "8 lies beyond its batch of 4";
  EXPECT_EQ(sweep.contexts, std::vector<int>{64});
  EXPECT_EQ(sweep.repeats, 3);
}

TEST(ProfileCheckTest, RatiosAreMeasuredOverTheProfilesAndWarnPastTheLimit) {
  const model::PerformanceProfile reference = Profile(0.001, 0.02);
  ProfileSweepOptions sweep;
  sweep.prompt_lens = {64, 256};
  sweep.batches = {1, 8};
  sweep.contexts = {64};
  // This host: prompts at 2.5x the cost per token (the 2.19 s against 0.87 s), decode as
  // the profile.
  const model::PerformanceProfile here = Profile(0.0025, 0.02);
  const ProfileCheck check = CompareProfiles(reference, here, sweep);
  ASSERT_EQ(check.points.size(), 4u);
  EXPECT_EQ(check.points[0].kind, "prefill");
  EXPECT_NEAR(check.points[0].ratio(), (0.01 + 0.0025 * 64) / (0.01 + 0.001 * 64), 1e-12);
  EXPECT_NEAR(check.decode_ratio, 1.0, 1e-12);
  EXPECT_GT(check.prefill_ratio, 2);
  EXPECT_TRUE(ProfileCheckWarns(check, 0.10));
  const std::string report = ProfileCheckReport(reference, check, 0.10);
  EXPECT_NE(report.find("WARNING: this host's prefill steps take"), std::string::npos) << report;
  EXPECT_EQ(report.find("decode steps take"), std::string::npos) << report;
  EXPECT_FALSE(ProfileCheckWarns(CompareProfiles(reference, reference, sweep), 0.10));
}

}  // namespace
}  // namespace pdserve::bench
