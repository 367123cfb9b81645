// PerformanceProfile: the fit recovers a known step-time model, drops a coefficient noise would
// make negative, follows a step time that is not linear in the batch through its measured
// points, predicts prefill, decode and mixed steps as its header says, flags work beyond what was
// measured, and reads its JSON back or says which field is wrong.
#include "model/performance_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "tests/model/random_model.h"

namespace pdserve::model {
namespace {

TEST(PerformanceProfile, StepShapesCountAttentionPairsAndContext) {
  StepShape s;
  AddPromptChunk(s, /*start=*/0, /*tokens=*/4);   // pairs 1 + 2 + 3 + 4
  AddPromptChunk(s, /*start=*/10, /*tokens=*/2);  // 11 + 12
  AddDecodeToken(s, /*position=*/99);             // attends to 100 tokens
  EXPECT_EQ(s.prompt_tokens, 6);
  EXPECT_EQ(s.prompt_attention, 10 + 23);
  EXPECT_EQ(s.decode_tokens, 1);
  EXPECT_EQ(s.decode_context, 100);
  EXPECT_EQ(s.max_context, 100);
}

TEST(PerformanceProfile, FitRecoversAKnownModelFromNoisySteps) {
  std::mt19937 rng(3);
  std::normal_distribution<double> noise(1.0, 0.01);
  std::vector<StepSample> steps;
  for (int n : {16, 64, 128, 256, 512, 1024}) {
    for (int r = 0; r < 3; ++r) {
      StepSample s;
      AddPromptChunk(s.shape, 0, n);
      s.seconds = (0.004 + 2e-5 * n + 1e-9 * s.shape.prompt_attention) * noise(rng);
      steps.push_back(s);
    }
  }
  for (int b : {1, 4, 16, 64}) {
    for (int ctx : {64, 512, 2048}) {
      StepSample s;
      for (int i = 0; i < b; ++i) AddDecodeToken(s.shape, ctx - 1);
      s.seconds = (0.003 + 1e-4 * b + 2e-8 * s.shape.decode_context) * noise(rng);
      steps.push_back(s);
    }
  }
  PerformanceProfile p;
  ASSERT_TRUE(FitProfile(steps, &p).ok());
  EXPECT_NEAR(p.prefill.base, 0.004, 0.0005);
  EXPECT_NEAR(p.prefill.per_token, 2e-5, 2e-6);
  EXPECT_NEAR(p.decode.base, 0.003, 0.0003);
  EXPECT_NEAR(p.decode.per_token, 1e-4, 1e-5);
  EXPECT_NEAR(p.decode.per_context, 2e-8, 4e-9);
  EXPECT_LT(p.prefill_fit_error, 0.03);
  EXPECT_LT(p.decode_fit_error, 0.03);
  EXPECT_EQ(p.range.prompt_tokens, 1024);
  EXPECT_EQ(p.range.decode_tokens, 64);
  EXPECT_EQ(p.range.max_context, 2048);
  EXPECT_EQ(p.samples, static_cast<int>(steps.size()));
}

TEST(PerformanceProfile, FitDropsACoefficientNoiseWouldMakeNegative) {
  // Time falls slightly with y while rising with x: a plain fit gives y a negative slope.
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};
  const std::vector<double> y = {6, 5, 4, 3, 2, 1.5};
  const std::vector<double> t = {1.1, 2.0, 3.05, 3.9, 5.1, 6.0};
  auto m = FitLinearStepModel(x, y, t);
  ASSERT_TRUE(m.ok());
  EXPECT_GE(m->base, 0);
  EXPECT_GE(m->per_token, 0);
  EXPECT_GE(m->per_context, 0);
  EXPECT_NEAR(m->per_token, 1.0, 0.1);
  EXPECT_FALSE(FitLinearStepModel({1, 2}, {1, 2}, {1, 2}).ok());  // too few samples
  EXPECT_FALSE(FitLinearStepModel({1, 2, 3}, {1, 2}, {1, 2, 3}).ok());
}

TEST(PerformanceProfile, PredictsPrefillDecodeAndMixedSteps) {
  PerformanceProfile p;
  p.prefill = {0.01, 0.001, 1e-6};
  p.decode = {0.002, 0.0005, 1e-7};
  StepShape prefill;
  AddPromptChunk(prefill, 0, 10);  // 55 pairs
  EXPECT_DOUBLE_EQ(p.StepSeconds(prefill), 0.01 + 0.01 + 55e-6);
  StepShape decode;
  AddDecodeToken(decode, 9);
  AddDecodeToken(decode, 19);
  EXPECT_DOUBLE_EQ(p.StepSeconds(decode), 0.002 + 0.001 + 30e-7);
  StepShape mixed = prefill;
  AddDecodeToken(mixed, 9);
  // The prefill base (the weights read once) and each kind's slopes.
  EXPECT_DOUBLE_EQ(p.StepSeconds(mixed), 0.01 + 0.01 + 55e-6 + 0.0005 + 10e-7);
  EXPECT_EQ(p.StepSeconds(StepShape{}), 0);
}

// A step time that is not linear in the batch (a batch of one on another kernel than two): the
// curve goes through each measured batch where a line cannot, and interpolates between them.
TEST(PerformanceProfile, CurveFollowsAStepTimeALineCannot) {
  std::mt19937 rng(5);
  std::normal_distribution<double> noise(1.0, 0.01);
  auto truth = [](int batch) { return batch == 1 ? 0.015 : 0.020 + 0.0006 * batch; };
  std::vector<StepSample> steps;
  for (int b : {1, 2, 4, 8, 16}) {
    for (int ctx : {64, 192}) {
      for (int r = 0; r < 4; ++r) {
        StepSample s;
        for (int i = 0; i < b; ++i) AddDecodeToken(s.shape, ctx - 1);
        s.seconds = (truth(b) + 2e-6 * s.shape.decode_context) * noise(rng);
        steps.push_back(s);
      }
    }
  }
  for (int n : {16, 64, 256}) {  // FitProfile needs prompt steps too
    for (int r = 0; r < 2; ++r) {
      StepSample s;
      AddPromptChunk(s.shape, 0, n);
      s.seconds = 0.01 + 1e-4 * n;
      steps.push_back(s);
    }
  }
  PerformanceProfile p;
  ASSERT_TRUE(FitProfile(steps, &p).ok());
  ASSERT_EQ(p.decode_curve.points.size(), 5u);
  EXPECT_NEAR(p.decode_curve.per_context, 2e-6, 3e-7);
  for (const auto& [b, seconds] : p.decode_curve.points) {
    EXPECT_NEAR(seconds, truth(b), 0.01 * truth(b)) << "batch " << b;
  }
  EXPECT_LT(p.decode_fit_error, 0.015);
  // The line's error at a batch of one, for scale: the curve is what makes the fit good.
  StepShape one;
  AddDecodeToken(one, 63);
  const double line = p.decode.base + p.decode.per_token + p.decode.per_context * 64;
  EXPECT_GT(std::fabs(line - truth(1)) / truth(1), 0.05);
  EXPECT_NEAR(p.StepSeconds(one), truth(1) + 2e-6 * 64, 0.02 * truth(1));
  // Between measured batches the curve interpolates: a batch of 3 between those of 2 and 4.
  StepShape three;
  for (int i = 0; i < 3; ++i) AddDecodeToken(three, 63);
  EXPECT_NEAR(p.StepSeconds(three), (truth(2) + truth(4)) / 2 + 2e-6 * 192, 0.02 * truth(3));
}

TEST(PerformanceProfile, CurveInterpolatesAndExtendsItsEndSegments) {
  MeasuredCurve c;
  c.points = {{2, 0.010}, {4, 0.014}, {8, 0.016}};
  c.per_context = 1e-6;
  EXPECT_DOUBLE_EQ(c.At(2, 0), 0.010);
  EXPECT_DOUBLE_EQ(c.At(3, 0), 0.012);
  EXPECT_DOUBLE_EQ(c.At(6, 1000), 0.015 + 0.001);
  EXPECT_DOUBLE_EQ(c.At(1, 0), 0.008);   // the first segment's slope below the first point
  EXPECT_DOUBLE_EQ(c.At(12, 0), 0.018);  // the last segment's beyond the last
  MeasuredCurve steep;
  steep.points = {{10, 0.001}, {20, 0.011}};
  EXPECT_EQ(steep.At(1, 0), 0);  // never below zero
  MeasuredCurve single;
  single.points = {{4, 0.02}};
  EXPECT_DOUBLE_EQ(single.At(100, 0), 0.02);
  // One distinct count: no curve (the linear model stands).
  auto none = FitMeasuredCurve({4, 4, 4}, {1, 2, 3}, {0.1, 0.2, 0.3});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(FitMeasuredCurve({1, 2}, {1}, {1, 2}).ok());
  EXPECT_FALSE(FitMeasuredCurve({0, 2}, {1, 1}, {1, 2}).ok());
}

TEST(PerformanceProfile, SaysWhatLiesOutsideTheMeasuredRange) {
  PerformanceProfile p;
  p.range = {512, 32, 2048};
  StepShape inside;
  AddPromptChunk(inside, 0, 512);
  EXPECT_EQ(p.OutsideRange(inside), "");
  StepShape outside;
  AddPromptChunk(outside, 2000, 600);
  const std::string why = p.OutsideRange(outside);
  EXPECT_NE(why.find("600 prompt tokens in a step (profiled up to 512)"), std::string::npos) << why;
  EXPECT_NE(why.find("a context of 2600 tokens (profiled up to 2048)"), std::string::npos) << why;
}

TEST(PerformanceProfile, JsonRoundTripsAndBadFieldsAreNamed) {
  PerformanceProfile p;
  p.name = "test";
  p.device = "cpu";
  p.prefill = {0.01, 0.001, 1e-6};
  p.decode = {0.002, 0.0005, 1e-7};
  p.range = {512, 32, 2048};
  p.kv_bytes_per_token = 4096;
  p.kv_bytes_per_second = 1e9;
  p.n_layers = 4;
  p.kv_pages = 100;
  p.cold_start_seconds = 1.5;
  p.model_shape = {{"hidden_size", 64}};
  auto back = PerformanceProfile::FromJson(p.ToJson(), "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), p.ToJson());
  EXPECT_FALSE(p.ToJson().contains("decode_curve"));  // a profile without curves keeps none
  p.decode_curve.points = {{1, 0.015}, {2, 0.02}};
  p.decode_curve.per_context = 1e-6;
  back = PerformanceProfile::FromJson(p.ToJson(), "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ToJson(), p.ToJson());
  EXPECT_EQ(back->decode_curve.points, p.decode_curve.points);
  EXPECT_FALSE(p.ToJson().contains("decode_gap_seconds"));  // none measured
  p.decode_gap_seconds = 0.0031;
  back = PerformanceProfile::FromJson(p.ToJson(), "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->decode_gap_seconds, 0.0031);
  EXPECT_FALSE(p.ToJson().contains("prefill_spread"));  // none measured
  p.prefill_spread = {0.9, 1.0, 1.3};
  p.decode_spread = {0.95, 1.05};
  back = PerformanceProfile::FromJson(p.ToJson(), "t");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->prefill_spread, p.prefill_spread);
  EXPECT_EQ(back->decode_spread, p.decode_spread);

  auto unordered = p.ToJson();
  unordered["decode_curve"]["points"] = {{2, 0.02}, {1, 0.015}};
  auto refused = PerformanceProfile::FromJson(unordered, "f.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("f.json: decode_curve: points must ascend"),
            std::string::npos)
      << refused.status().message();
  unordered["decode_curve"]["points"] = {{0, 0.02}};
  EXPECT_FALSE(PerformanceProfile::FromJson(unordered, "f.json").ok());

  auto j = p.ToJson();
  j["decode"]["per_token"] = -1;
  auto bad = PerformanceProfile::FromJson(j, "f.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("f.json: decode: field 'per_token'"), std::string::npos)
      << bad.status().message();
  j = p.ToJson();
  j["decode_gap_seconds"] = -0.001;
  bad = PerformanceProfile::FromJson(j, "f.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'decode_gap_seconds'"), std::string::npos);
  for (const nlohmann::json& spread : {nlohmann::json{1.1, 0.9}, nlohmann::json{0.0, 1.0},
                                       nlohmann::json{"1"}, nlohmann::json(1.0)}) {
    j = p.ToJson();
    j["decode_spread"] = spread;
    bad = PerformanceProfile::FromJson(j, "f.json");
    ASSERT_FALSE(bad.ok()) << spread.dump();
    EXPECT_NE(bad.status().message().find("f.json: decode_spread"), std::string::npos)
        << bad.status().message();
  }
  j = p.ToJson();
  j.erase("kv_pages");
  bad = PerformanceProfile::FromJson(j, "f.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'kv_pages'"), std::string::npos);
  EXPECT_FALSE(PerformanceProfile::FromJson(nlohmann::json::array(), "f.json").ok());
}

// Quantile i of n sits at probability (i + 0.5) / n; between two, the factor is linear; beyond
// the outermost, it is held.
TEST(PerformanceProfile, SpreadFactorInterpolatesItsQuantiles) {
  EXPECT_EQ(SpreadFactor({}, 0.3), 1.0);
  EXPECT_EQ(SpreadFactor({1.2}, 0.9), 1.2);
  const std::vector<double> spread = {0.8, 1.0, 1.6, 2.0};  // at 0.125, 0.375, 0.625, 0.875
  EXPECT_DOUBLE_EQ(SpreadFactor(spread, 0.0), 0.8);
  EXPECT_DOUBLE_EQ(SpreadFactor(spread, 0.125), 0.8);
  EXPECT_DOUBLE_EQ(SpreadFactor(spread, 0.25), 0.9);
  EXPECT_DOUBLE_EQ(SpreadFactor(spread, 0.5), 1.3);
  EXPECT_DOUBLE_EQ(SpreadFactor(spread, 0.875), 2.0);
  EXPECT_DOUBLE_EQ(SpreadFactor(spread, 0.999), 2.0);
}

TEST(PerformanceProfile, FindsZeroFilesAndNamesAndSaysWhereItLooked) {
  auto zero = FindProfile("zero");
  ASSERT_TRUE(zero.ok());
  StepShape s;
  AddPromptChunk(s, 0, 100000);
  EXPECT_EQ(zero->StepSeconds(s), 0);
  EXPECT_EQ(zero->OutsideRange(s), "");

  testing::TempDir dir;
  const std::string path = dir.path() + "/mine.json";
  PerformanceProfile p = PerformanceProfile::Zero();
  p.name = "";
  ASSERT_TRUE(p.Save(path).ok());
  auto loaded = FindProfile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->name, "mine");  // from the file name when the file has none

  auto missing = FindProfile("no-such-profile");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("profiles/no-such-profile.json"), std::string::npos)
      << missing.status().message();
  std::ofstream(dir.path() + "/broken.json") << "{";
  EXPECT_FALSE(FindProfile(dir.path() + "/broken.json").ok());
}

// The measured profiles the repository keeps (profiles/, named by `--device sim:NAME`): each
// loads, says where it came from, fits its own steps to within 15%, and times a step in range.
TEST(PerformanceProfile, EveryProfileInTheRepositoryLoadsAndFitsItsMeasurements) {
  const std::filesystem::path dir = std::filesystem::path(PDSERVE_SOURCE_DIR) / "profiles";
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++found;
    const std::string name = entry.path().stem().string();
    auto p = FindProfile(entry.path().string());
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    EXPECT_EQ(p->name, name);
    EXPECT_FALSE(p->device.empty() || p->device_name.empty() || p->model_id.empty() ||
                 p->command.empty() || p->date.empty())
        << name << ": its provenance is incomplete";
    EXPECT_GT(p->samples, 20) << name;
    EXPECT_LT(p->prefill_fit_error, 0.15) << name;
    EXPECT_LT(p->decode_fit_error, 0.15) << name;
    EXPECT_GT(p->kv_bytes_per_token, 0) << name;
    EXPECT_GT(p->kv_pages, 0) << name;
    StepShape decode;
    AddDecodeToken(decode, 63);
    EXPECT_GT(p->StepSeconds(decode), 0) << name;
    EXPECT_EQ(p->OutsideRange(decode), "") << name;
  }
  EXPECT_GE(found, 2) << "profiles/ should hold the small-cpu and llama3-8b-h200 profiles";
}

}  // namespace
}  // namespace pdserve::model
