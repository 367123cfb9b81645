// An attempt priced once (ledger/attempt_cost.h): each part from its own usage and price, zero
// where its price or worker is missing, and the total their sum. Prices make the arithmetic easy:
// $3.60 per GPU-hour is $0.001 per GPU-second.
#include "ledger/attempt_cost.h"

#include <gtest/gtest.h>

#include "ledger/ledger.h"

namespace pdserve::ledger {
namespace {

AttemptRow SelfHosted() {
  AttemptRow r;
  r.prefill_worker = {1, "p", "prefill", CapacityClass::kReserved, "zone-a", 3.6, 2};
  r.decode_worker = {2, "d", "decode", CapacityClass::kBurst, "zone-b", 7.2, 1};
  r.prefill_step_seconds = 1.5;
  r.decode_step_seconds = 4;
  r.kv_bytes = 3'000'000'000;
  r.prompt_tokens = 1000;
  r.completion_tokens = 200;
  return r;
}

TEST(AttemptCostTest, EachSelfHostedPartIsItsUsageAtItsPrice) {
  const AttemptCost c = PriceAttempt(SelfHosted(), {.egress_usd_per_gb = 0.02});
  EXPECT_DOUBLE_EQ(c.prefill_compute_usd, 1.5 * 2 * 0.001);  // step seconds x GPUs x price
  EXPECT_DOUBLE_EQ(c.decode_compute_usd, 4 * 1 * 0.002);
  EXPECT_DOUBLE_EQ(c.egress_usd, 3 * 0.02);  // 3 GB from zone-a to zone-b
  EXPECT_EQ(c.api_tokens_usd, 0);            // no token prices given
  EXPECT_EQ(c.total(), c.prefill_compute_usd + c.decode_compute_usd + c.egress_usd);
  EXPECT_DOUBLE_EQ(c.total(), 0.003 + 0.008 + 0.06);
}

TEST(AttemptCostTest, KvInOneZoneOrWithoutAPriceCostsNoEgress) {
  AttemptRow same_zone = SelfHosted();
  same_zone.decode_worker.zone = "zone-a";
  EXPECT_EQ(PriceAttempt(same_zone, {.egress_usd_per_gb = 0.02}).egress_usd, 0);
  EXPECT_EQ(PriceAttempt(SelfHosted(), {}).egress_usd, 0);
  EXPECT_GT(PriceAttempt(SelfHosted(), {}).prefill_compute_usd, 0);
}

TEST(AttemptCostTest, APhaseNoWorkerRanCostsNothing) {
  AttemptRow r = SelfHosted();
  r.decode_worker = {};
  r.decode_step_seconds = 0;
  const AttemptCost c = PriceAttempt(r, {.egress_usd_per_gb = 0.02});
  EXPECT_DOUBLE_EQ(c.prefill_compute_usd, 0.003);
  EXPECT_EQ(c.decode_compute_usd, 0);
  EXPECT_EQ(c.egress_usd, 0);  // no zone on the other side
}

TEST(AttemptCostTest, AnExternalAttemptIsItsTokensAtTheUpstreamsPricesExactly) {
  AttemptRow r;
  r.prefill_worker = r.decode_worker = {0, "openai", "api", CapacityClass::kApi, "", 0, 0};
  r.prompt_tokens = 1234;
  r.completion_tokens = 567;
  const AttemptCost c =
      PriceAttempt(r, {.input_usd_per_token = 1.5e-07, .output_usd_per_token = 6e-07});
  const volatile double input = 1234.0 * 1.5e-07, output = 567.0 * 6e-07;  // not fused
  EXPECT_EQ(c.api_tokens_usd, input + output);
  EXPECT_EQ(c.prefill_compute_usd + c.decode_compute_usd + c.egress_usd, 0);
  EXPECT_EQ(c.total(), input + output);  // what the client is told, bit for bit
}

TEST(AttemptCostTest, AnExternalAttemptsCachedPromptTokensCostTheCachedPrice) {
  AttemptRow r;
  r.prefill_worker = r.decode_worker = {0, "openai", "api", CapacityClass::kApi, "", 0, 0};
  r.prompt_tokens = 1000;
  r.cached_prompt_tokens = 800;
  r.completion_tokens = 100;
  const AttemptCost c = PriceAttempt(r, {.input_usd_per_token = 2e-06,
                                         .output_usd_per_token = 8e-06,
                                         .cached_input_usd_per_token = 5e-07});
  EXPECT_DOUBLE_EQ(c.api_tokens_usd, 200 * 2e-06 + 800 * 5e-07 + 100 * 8e-06);
  // No cached price given: cached tokens cost the input price.
  const AttemptCost full =
      PriceAttempt(r, {.input_usd_per_token = 2e-06, .output_usd_per_token = 8e-06});
  EXPECT_DOUBLE_EQ(full.api_tokens_usd, 1000 * 2e-06 + 100 * 8e-06);
}

}  // namespace
}  // namespace pdserve::ledger
