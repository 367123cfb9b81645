// vLLM's metric definitions on synthetic records, against values computed by hand.
#include "bench/serve/metrics.h"

#include <gtest/gtest.h>

namespace pdserve::bench {
namespace {

RequestRecord Ok(double ttft, double latency, int64_t output, std::vector<double> itl,
                 int64_t prompt) {
  RequestRecord r;
  r.success = true;
  r.ttft_s = ttft;
  r.latency_s = latency;
  r.output_tokens = output;
  r.chunks = output;
  r.itl_s = std::move(itl);
  r.prompt_tokens = prompt;
  return r;
}

std::vector<RequestRecord> Synthetic() {
  RequestRecord failed;
  failed.failure = FailureKind::kTimeout;
  return {Ok(0.1, 0.5, 5, std::vector<double>(4, 0.1), 10),    // tpot 0.4 / 4 = 0.1
          Ok(0.2, 1.2, 11, std::vector<double>(10, 0.1), 20),  // tpot 1.0 / 10 = 0.1
          Ok(0.3, 0.3, 1, {}, 30),                             // one token: no tpot (0 for goodput)
          Ok(0.4, 2.4, 5, std::vector<double>(4, 0.5), 40),    // tpot 2.0 / 4 = 0.5
          failed};
}

TEST(Metrics, MatchHandComputedValues) {
  auto m = CalculateMetrics(Synthetic(), 2.0, {90, 99}, {});
  EXPECT_EQ(m.completed, 4);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.failures_by_reason.at("timeout"), 1);
  EXPECT_EQ(m.total_input, 100);
  EXPECT_EQ(m.total_output, 22);
  EXPECT_DOUBLE_EQ(m.request_throughput, 2.0);
  EXPECT_DOUBLE_EQ(m.output_throughput, 11.0);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 61.0);
  EXPECT_NEAR(m.ttft.mean_ms, 250, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 250, 1e-9);
  EXPECT_NEAR(m.ttft.std_ms, 111.80339887498948, 1e-9);  // population std, as numpy
  ASSERT_EQ(m.ttft.percentiles_ms.size(), 2u);
  EXPECT_NEAR(m.ttft.percentiles_ms[0].second, 370, 1e-9);  // rank 2.7: 0.3 + 0.7 * 0.1
  EXPECT_NEAR(m.ttft.percentiles_ms[1].second, 397, 1e-9);  // rank 2.97
  EXPECT_NEAR(m.tpot.mean_ms, 700.0 / 3, 1e-9);             // (0.1 + 0.1 + 0.5) / 3
  EXPECT_NEAR(m.tpot.median_ms, 100, 1e-9);
  EXPECT_NEAR(m.tpot.percentiles_ms[1].second, 492, 1e-9);  // rank 1.98: 0.1 + 0.98 * 0.4
  EXPECT_NEAR(m.itl.mean_ms, 3400.0 / 18, 1e-9);            // 14 gaps of 0.1, 4 of 0.5
  EXPECT_NEAR(m.itl.median_ms, 100, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, 1100, 1e-9);
  EXPECT_NEAR(m.e2el.median_ms, 850, 1e-9);
  EXPECT_EQ(m.good_completed, 0);  // no SLOs: no goodput
}

TEST(Metrics, GoodputCountsRequestsMeetingEverySloInclusive) {
  auto slo = ParseGoodput({"ttft:300", "tpot:200"});
  ASSERT_TRUE(slo.ok());
  auto m = CalculateMetrics(Synthetic(), 2.0, {99}, *slo);
  EXPECT_EQ(m.good_completed, 3);  // the 0.4 s TTFT misses; 0.3 s meets 300 ms exactly
  EXPECT_DOUBLE_EQ(m.request_goodput, 1.5);
  slo = ParseGoodput({"ttft:300", "tpot:200", "e2el:1000"});
  ASSERT_TRUE(slo.ok());
  m = CalculateMetrics(Synthetic(), 2.0, {99}, *slo);
  EXPECT_EQ(m.good_completed, 2);  // and the 1.2 s request misses e2el
  slo = ParseGoodput({"tpot:100"});
  ASSERT_TRUE(slo.ok());
  m = CalculateMetrics(Synthetic(), 2.0, {99}, *slo);
  EXPECT_EQ(m.good_completed, 3);  // the one-token request counts as tpot 0
}

TEST(Metrics, EmptyListsReadAsZeroLikeVllm) {
  RequestRecord failed;
  failed.failure = FailureKind::kConnect;
  auto m = CalculateMetrics({failed}, 1.0, {99}, {});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.ttft.mean_ms, 0);
  EXPECT_EQ(m.ttft.percentiles_ms[0].second, 0);
  EXPECT_EQ(m.failures_by_reason.at("connect"), 1);
}

TEST(Metrics, PercentileInterpolatesLinearlyLikeNumpy) {
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 25), 1.75);
  EXPECT_DOUBLE_EQ(Percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(Percentile({1, 2, 3, 4}, 100), 4);
}

TEST(Metrics, ParsesAndRejectsFlags) {
  auto ps = ParsePercentiles("50, 90,99.9");
  ASSERT_TRUE(ps.ok());
  EXPECT_EQ(*ps, (std::vector<double>{50, 90, 99.9}));
  EXPECT_EQ(PercentileLabel(99), "99");
  EXPECT_EQ(PercentileLabel(99.9), "99.9");
  EXPECT_FALSE(ParsePercentiles("").ok());
  EXPECT_FALSE(ParsePercentiles("0").ok());
  EXPECT_FALSE(ParsePercentiles("101").ok());
  EXPECT_FALSE(ParsePercentiles("9x").ok());
  EXPECT_FALSE(ParseGoodput({"ttft"}).ok());
  EXPECT_FALSE(ParseGoodput({"latency:5"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:-1"}).ok());
  EXPECT_FALSE(ParseGoodput({"ttft:abc"}).ok());
  auto slo = ParseGoodput({"e2el:2500.5"});
  ASSERT_TRUE(slo.ok());
  EXPECT_DOUBLE_EQ(*slo->e2el_ms, 2500.5);
}

}  // namespace
}  // namespace pdserve::bench
