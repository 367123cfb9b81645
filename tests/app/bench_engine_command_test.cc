// `pdserve bench engine` as a user runs it, on a small random model: every figure of the table
// and the JSON file, the roofline against reads paired with the batch-1 runs, and a second
// matrix dtype timed in the same run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>

#include "tests/app/json_run.h"
#include "tests/command_run.h"

namespace pdserve {
namespace {

using pdserve::testing::Pdserve;
using pdserve::testing::PdserveJson;

TEST(BenchEngineCommandTest, PrintsAndWritesEveryFigureWithADtypeComparison) {
  auto [run, doc] = PdserveJson(
      "bench engine --batches 1,2 --repeats 2 --prompt-len 8 --decode-steps 4 --threads 2 "
      "--compare-dtype bf16");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("of roofline"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("bf16 weights (same run, paired batch-1 runs)"), std::string::npos)
      << run.out;

  EXPECT_EQ(doc["dtype"], "f32");  // the built-in model's checkpoint
  EXPECT_EQ(doc["threads"], 2);
  for (const char* batch : {"1", "2"}) {
    EXPECT_GT(doc["prefill_tokens_per_s"][batch].get<double>(), 0.0) << batch;
    EXPECT_GT(doc["decode_tokens_per_s"][batch].get<double>(), 0.0) << batch;
    EXPECT_GT(doc["decode_vs_batch1"][batch].get<double>(), 0.0) << batch;
  }
  EXPECT_EQ(doc["decode_vs_batch1"]["1"].get<double>(), 1.0);
  EXPECT_GT(doc["read_gbps"].get<double>(), 0.0);
  EXPECT_GT(doc["copy_gbps"].get<double>(), 0.0);
  EXPECT_GT(doc["roofline_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GT(doc["roofline_ratio"].get<double>(), 0.0);
  EXPECT_NE(doc["roofline_method"].get<std::string>().find("right before"), std::string::npos);
  EXPECT_NE(run.out.find("compute: FMA peak"), std::string::npos) << run.out;
  EXPECT_GT(doc["fma_gflops"].get<double>(), 0.0);
  EXPECT_GT(doc["decode_flops_per_token"].get<double>(), 0.0);
  for (const char* batch : {"1", "2"}) {
    // Tokens/s x FLOPs per token over the peak: a fraction of it, however slow the machine.
    const double ratio = doc["decode_peak_ratio"][batch].get<double>();
    EXPECT_GT(ratio, 0.0) << batch;
    EXPECT_LT(ratio, 1.0) << batch;
  }
  // Each round's own figures: a read and an FMA probe before its batch-1 run, and every batch.
  // The summary's medians lie among them.
  ASSERT_EQ(doc["rounds"].size(), 2u);
  const double first = doc["rounds"][0]["decode_tokens_per_s"]["1"].get<double>();
  const double second = doc["rounds"][1]["decode_tokens_per_s"]["1"].get<double>();
  EXPECT_GE(doc["decode_tokens_per_s"]["1"].get<double>(), std::min(first, second));
  EXPECT_LE(doc["decode_tokens_per_s"]["1"].get<double>(), std::max(first, second));
  for (const auto& round : doc["rounds"]) {
    EXPECT_GT(round["read_gbps"].get<double>(), 0.0);
    EXPECT_GT(round["fma_gflops"].get<double>(), 0.0);
    for (const char* batch : {"1", "2"}) {
      EXPECT_GT(round["prefill_tokens_per_s"][batch].get<double>(), 0.0) << batch;
      EXPECT_GT(round["decode_tokens_per_s"][batch].get<double>(), 0.0) << batch;
    }
  }
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
