#include "model/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <vector>

namespace pdserve::model {
namespace {

TEST(SamplerTest, GreedyPicksTheFirstMaximum) {
  SamplingParams p;
  p.temperature = 0;
  Sampler s(p);
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(SamplerTest, ArgMaxAgreesWithMaxElementOnEveryLengthAndTie) {
  std::mt19937 rng(7);
  for (int n : {0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 100, 1000, 32000, 32003}) {
    for (int trial = 0; trial < 20; ++trial) {
      // Few distinct values, so maxima repeat in several lanes and chains.
      std::vector<float> v(n);
      for (float& x : v) x = static_cast<float>(rng() % 5) - 2.0f;
      if (trial % 4 == 1 && n > 0) v[rng() % n] = 3.0f;  // one clear maximum anywhere
      const int32_t expected =
          static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
      EXPECT_EQ(ArgMax(v), expected) << "n=" << n << " trial=" << trial;
    }
  }
}

TEST(SamplerTest, ArgMaxSkipsNaNsAndHandlesInfinities) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v(40, -1.0f);
  v[0] = nan;
  v[17] = 5.0f;
  v[33] = nan;
  EXPECT_EQ(ArgMax(v), 17);
  v[38] = inf;
  EXPECT_EQ(ArgMax(v), 38);
  EXPECT_EQ(ArgMax(std::vector<float>(50, -inf)), 0);
  EXPECT_EQ(ArgMax(std::vector<float>(50, nan)), 0);
  // A NaN first and nothing above -inf: the first -inf, as the CUDA argmax picks.
  for (int n : {3, 40}) {
    std::vector<float> w(n, -inf);
    w[0] = nan;
    EXPECT_EQ(ArgMax(w), 1) << "n=" << n;
  }
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

// The nucleus a full sort gives: the most likely tokens (the lower id among equals) until their
// probability reaches top_p of the kept total.
std::vector<int32_t> ReferenceNucleus(const std::vector<float>& logits, float top_p, int top_k) {
  std::vector<std::pair<double, int32_t>> c;
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  for (int i = 0; i < static_cast<int>(logits.size()); ++i) {
    c.push_back({std::exp(logits[i] - max_logit), i});
  }
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (top_k > 0 && top_k < static_cast<int>(c.size())) c.resize(top_k);
  double total = 0;
  for (const auto& x : c) total += x.first;
  std::vector<int32_t> nucleus;
  double cumulative = 0;
  for (const auto& x : c) {
    nucleus.push_back(x.second);
    cumulative += x.first;
    if (cumulative >= top_p * total) break;
  }
  std::sort(nucleus.begin(), nucleus.end());
  return nucleus;
}

TEST(SamplerTest, TheNucleusIsAFullSortsEvenWhenItSpansMuchOfTheVocabulary) {
  // Flat logits with ties: the nucleus runs past the first heads the sampler orders.
  std::mt19937 rng(5);
  for (const auto& [vocab, top_p, top_k] :
       std::vector<std::tuple<int, float, int>>{{4000, 0.9f, 0},
                                                {4000, 0.3f, 0},
                                                {300, 0.99f, 0},
                                                {5000, 0.8f, 1000},
                                                {50, 0.5f, 0},
                                                {4000, 1.0f, 700}}) {
    std::vector<float> logits(vocab);
    for (float& x : logits) x = static_cast<float>(rng() % 64) / 32.0f;
    const std::vector<int32_t> nucleus = ReferenceNucleus(logits, top_p, top_k);
    SamplingParams p;
    p.top_p = top_p;
    p.top_k = top_k;
    p.seed = 9;
    Sampler s(p);
    std::vector<int32_t> seen;
    for (int i = 0; i < 20000; ++i) seen.push_back(s.Sample(logits));
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t t : seen) {
      ASSERT_TRUE(std::binary_search(nucleus.begin(), nucleus.end(), t))
          << "token " << t << " is outside the nucleus (vocab " << vocab << ", top_p " << top_p
          << ", top_k " << top_k << ")";
    }
    // Most of the nucleus turns up in 20,000 draws (every member when it is small).
    EXPECT_GE(seen.size(), std::min<size_t>(nucleus.size(), 20000) * 9 / 10)
        << "vocab " << vocab << ", top_p " << top_p << ", nucleus " << nucleus.size();
  }
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
  p = {};
  p.samples_drawn = -1;
  EXPECT_NE(p.Validate().message().find("samples_drawn"), std::string::npos);
  p.samples_drawn = SamplingParams::kMaxSamplesDrawn + 1;
  EXPECT_NE(p.Validate().message().find("samples_drawn"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.Validate().ok());
}

// A stream resumed elsewhere after k tokens goes on as the unmoved stream would: a sampler
// built with samples_drawn k gives what the first gives from its (k+1)th draw.
TEST(SamplerTest, SamplesDrawnStartsTheStreamPastThem) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  std::vector<float> logits(50);
  for (int i = 0; i < 50; ++i) logits[i] = std::sin(i * 0.7f);
  Sampler whole(p);
  std::vector<int32_t> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(whole.Sample(logits));
  p.samples_drawn = 25;
  Sampler resumed(p);
  std::vector<int32_t> rest;
  for (int i = 25; i < 40; ++i) rest.push_back(resumed.Sample(logits));
  EXPECT_EQ(rest, std::vector<int32_t>(tokens.begin() + 25, tokens.end()));
  p.samples_drawn = 24;  // one short: a different stream (the test can tell)
  Sampler off(p);
  std::vector<int32_t> shifted;
  for (int i = 25; i < 40; ++i) shifted.push_back(off.Sample(logits));
  EXPECT_NE(shifted, rest);
}

}  // namespace
}  // namespace pdserve::model
