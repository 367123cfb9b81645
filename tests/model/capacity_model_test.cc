#include "model/capacity_model.h"

#include <gtest/gtest.h>

namespace pdserve::model {
namespace {

// Prefill: 10 ms + 1 ms a prompt token; decode: 20 ms + 1 ms a sequence; no context terms.
PerformanceProfile Linear() {
  PerformanceProfile p;
  p.name = "linear";
  p.prefill = {0.010, 0.001, 0};
  p.decode = {0.020, 0.001, 0};
  p.page_size = 16;
  p.kv_pages = 100;
  p.max_batch_tokens = 1000;
  return p;
}

TEST(CapacityModelTest, APrefillWorkerRunsWholePromptsUpToItsStepBudget) {
  const WorkerCapacity c = PrefillCapacity(Linear(), {100, 50}, {});
  EXPECT_EQ(c.batch, 10);
  EXPECT_NEAR(c.step_seconds, 0.010 + 1.0, 1e-12);
  EXPECT_NEAR(c.requests_per_second, 10 / 1.010, 1e-9);
  // A prompt over the budget still runs, alone.
  EXPECT_EQ(PrefillCapacity(Linear(), {5000, 50}, {}).batch, 1);
}

TEST(CapacityModelTest, ADecodeWorkerIsBoundByItsPagesItsRunningLimitAndTheTpot) {
  // 150 tokens a request: 10 pages of 16; 100 pages hold 10 sequences.
  WorkerCapacity c = DecodeCapacity(Linear(), {100, 50}, {}, 0);
  EXPECT_EQ(c.batch, 10);
  EXPECT_EQ(c.limited_by, "kv pages");
  EXPECT_NEAR(c.requests_per_second, 10 / (50 * 0.030), 1e-9);
  WorkerLimits limits;
  limits.max_running = 4;
  EXPECT_EQ(DecodeCapacity(Linear(), {100, 50}, limits, 0).batch, 4);
  EXPECT_EQ(DecodeCapacity(Linear(), {100, 50}, limits, 0).limited_by, "max running");
  // A 25 ms TPOT allows 5 sequences a step.
  c = DecodeCapacity(Linear(), {100, 50}, {}, 0.025);
  EXPECT_EQ(c.batch, 5);
  EXPECT_EQ(c.limited_by, "tpot");
  EXPECT_NEAR(c.requests_per_second, 5 / (50 * 0.025), 1e-9);
  // No room for even one request: nothing.
  EXPECT_EQ(DecodeCapacity(Linear(), {5000, 50}, {}, 0).requests_per_second, 0);
}

TEST(CapacityModelTest, TheClusterServesWhatItsSmallerPoolDoes) {
  const ClusterCapacity c = PredictCapacity(Linear(), {100, 50}, {}, 2, 3, 0);
  EXPECT_NEAR(c.requests_per_second, 2 * 10 / 1.010, 1e-9);  // 19.8 < 3 * 6.67
  EXPECT_EQ(c.bottleneck, "prefill");
  const ClusterCapacity d = PredictCapacity(Linear(), {100, 50}, {}, 4, 1, 0);
  EXPECT_EQ(d.bottleneck, "decode");
  EXPECT_NEAR(d.requests_per_second, 10 / 1.5, 1e-9);
}

}  // namespace
}  // namespace pdserve::model
