#include "model/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace pdserve::model {
namespace {

TEST(SamplerTest, GreedyPicksTheFirstMaximum) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(SamplerTest, SeedMakesSamplingReproducible) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 0.7f);
  Sampler a(p), b(p);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.Sample(logits), b.Sample(logits));
}

TEST(SamplerTest, TopKAndTopPKeepOnlyTheLikelyTokens) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams k;
  k.top_k = 2;
  k.seed = 1;
  Sampler sk(k);
  SamplingParams tp;
  tp.top_p = 0.75f;  // 0.5 + 0.3 reaches it
  tp.seed = 2;
  Sampler sp(tp);
  std::map<int, int> ck, cp;
  for (int i = 0; i < 4000; ++i) {
    ++ck[sk.Sample(logits)];
    ++cp[sp.Sample(logits)];
  }
  EXPECT_EQ(ck.size(), 2u);
  EXPECT_EQ(cp.size(), 2u);
  // Renormalised over the kept pair: 0.5 / 0.8 = 0.625.
  EXPECT_NEAR(ck[0] / 4000.0, 0.625, 0.03);
  EXPECT_NEAR(cp[0] / 4000.0, 0.625, 0.03);
}

TEST(SamplerTest, TemperatureMatchesTheSoftmax) {
  std::vector<float> logits = {0.0f, 1.0f};
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 3;
  Sampler s(p);
  int ones = 0;
  for (int i = 0; i < 10000; ++i) ones += s.Sample(logits);
  const double expected = std::exp(2.0) / (1 + std::exp(2.0));  // logits / 0.5
  EXPECT_NEAR(ones / 10000.0, expected, 0.02);
}

TEST(SamplerTest, ValidateNamesTheBadField) {
  SamplingParams p;
  p.temperature = -1;
  EXPECT_NE(p.Validate().message().find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0;
  EXPECT_NE(p.Validate().message().find("top_p"), std::string::npos);
  p = {};
  p.max_tokens = 0;
  EXPECT_NE(p.Validate().message().find("max_tokens"), std::string::npos);
  p = {};
  p.stop = {""};
  EXPECT_FALSE(p.Validate().ok());
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
}

}  // namespace
}  // namespace pdserve::model
