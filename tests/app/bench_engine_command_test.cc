// `pdserve bench engine` as a user runs it, on a small random model: every figure of the table
// and the JSON file, the roofline against reads paired with the batch-1 runs, and a second
// matrix dtype timed in the same run. The summary's figures are recomputed here from the JSON's
// own rounds.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/app/json_run.h"
#include "tests/command_run.h"

namespace pdserve {
namespace {

using pdserve::testing::Pdserve;
using pdserve::testing::PdserveJson;

// The middle value of an odd number of figures.
double MedianOfOdd(std::vector<double> v) {
  EXPECT_EQ(v.size() % 2, 1u);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void ExpectClose(double got, double want, const std::string& what) {
  EXPECT_NEAR(got, want, 1e-12 * std::abs(want)) << what;
}

TEST(BenchEngineCommandTest, PrintsAndWritesEveryFigureWithADtypeComparison) {
  auto [run, doc] = PdserveJson(
      "bench engine --batches 1,2 --repeats 3 --prompt-len 8 --decode-steps 4 --threads 2 "
      "--compare-dtype bf16");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("of roofline"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("bf16 weights (same run, paired batch-1 runs)"), std::string::npos)
      << run.out;

  EXPECT_EQ(doc["dtype"], "f32");  // the built-in model's checkpoint
  EXPECT_EQ(doc["threads"], 2);
  EXPECT_NE(doc["roofline_method"].get<std::string>().find("right before"), std::string::npos);
  EXPECT_NE(run.out.find("compute: FMA peak"), std::string::npos) << run.out;
  EXPECT_GT(doc["weight_bytes_per_token"].get<double>(), 0.0);
  EXPECT_GT(doc["copy_gbps"].get<double>(), 0.0);
  EXPECT_GT(doc["decode_flops_per_token"].get<double>(), 0.0);

  // Each round's own figures: a read and an FMA probe before its batch-1 run, and every batch.
  // The summary is their medians, and the medians of the ratios within a round.
  const auto& rounds = doc["rounds"];
  ASSERT_EQ(rounds.size(), 3u);
  auto over_rounds = [&](auto figure) {
    std::vector<double> values;
    for (const auto& round : rounds) values.push_back(figure(round));
    return MedianOfOdd(values);
  };
  for (const auto& round : rounds) {
    EXPECT_GT(round["read_gbps"].get<double>(), 0.0);
    EXPECT_GT(round["fma_gflops"].get<double>(), 0.0);
    for (const char* batch : {"1", "2"}) {
      EXPECT_GT(round["prefill_tokens_per_s"][batch].get<double>(), 0.0) << batch;
      EXPECT_GT(round["decode_tokens_per_s"][batch].get<double>(), 0.0) << batch;
    }
  }
  const double bytes_per_token = doc["weight_bytes_per_token"];
  const double read_gbps =
      over_rounds([](const nlohmann::json& r) { return r["read_gbps"].get<double>(); });
  const double fma_gflops =
      over_rounds([](const nlohmann::json& r) { return r["fma_gflops"].get<double>(); });
  ExpectClose(doc["read_gbps"], read_gbps, "read_gbps");
  ExpectClose(doc["fma_gflops"], fma_gflops, "fma_gflops");
  // The roofline: a token reads every matrix once, at the measured read bandwidth.
  ExpectClose(doc["roofline_tokens_per_s"], read_gbps * 1e9 / bytes_per_token, "roofline");
  // Its ratio: each batch-1 run against the roofline of the read taken right before it.
  ExpectClose(doc["roofline_ratio"], over_rounds([&](const nlohmann::json& r) {
                return r["decode_tokens_per_s"]["1"].get<double>() /
                       (r["read_gbps"].get<double>() * 1e9 / bytes_per_token);
              }),
              "roofline_ratio");
  for (const char* batch : {"1", "2"}) {
    const double decode = over_rounds(
        [&](const nlohmann::json& r) { return r["decode_tokens_per_s"][batch].get<double>(); });
    ExpectClose(doc["decode_tokens_per_s"][batch], decode, std::string("decode ") + batch);
    ExpectClose(doc["prefill_tokens_per_s"][batch], over_rounds([&](const nlohmann::json& r) {
                  return r["prefill_tokens_per_s"][batch].get<double>();
                }),
                std::string("prefill ") + batch);
    // Tokens/s x FLOPs per token over the peak: a fraction of it, however slow the machine.
    const double peak_ratio = doc["decode_peak_ratio"][batch];
    ExpectClose(peak_ratio,
                decode * doc["decode_flops_per_token"].get<double>() / (fma_gflops * 1e9),
                std::string("decode_peak_ratio ") + batch);
    EXPECT_LT(peak_ratio, 1.0) << batch;
  }
  // Batch 2 against batch 1 of the same round.
  ExpectClose(doc["decode_vs_batch1"]["2"], over_rounds([](const nlohmann::json& r) {
                return r["decode_tokens_per_s"]["2"].get<double>() /
                       r["decode_tokens_per_s"]["1"].get<double>();
              }),
              "decode_vs_batch1");
  const auto& compared = doc["dtype_comparison"];
  EXPECT_EQ(compared["dtype"], "bf16");
  EXPECT_GT(compared["decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(compared["base_decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(compared["ratio"].get<double>(), 0.0);
}

TEST(BenchEngineCommandTest, ConvertsTheMatricesWithDtype) {
  auto [run, doc] = PdserveJson(
      "bench engine --batches 1 --repeats 1 --prompt-len 4 --decode-steps 2 --dtype f16");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(doc["dtype"], "f16");
  EXPECT_TRUE(doc["dtype_comparison"].is_null());
}

TEST(BenchEngineCommandTest, RefusesADtypeComparisonOnAGpuAndUnknownDtypes) {
  auto gpu = Pdserve("bench engine --device cuda:0 --compare-dtype bf16");
  EXPECT_NE(gpu.exit_code, 0);
  EXPECT_NE(gpu.out.find("--compare-dtype is for the cpu"), std::string::npos) << gpu.out;
  auto unknown = Pdserve("bench engine --dtype q4");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.out.find("--dtype"), std::string::npos) << unknown.out;
}

}  // namespace
}  // namespace pdserve
