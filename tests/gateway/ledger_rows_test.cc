// Attempts as ledger rows (gateway/ledger_rows.h): a self-hosted attempt's workers and usage,
// priced by part; an external attempt's upstream as both workers, class api, and a cost of
// exactly the sheet's token prices times the tokens given.
#include "gateway/ledger_rows.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

proto::Register Registered(const std::string& name, const std::string& capacity_class,
                           const std::string& zone, double price, int gpus) {
  proto::Register r;
  r.set_name(name);
  r.set_role("both");
  r.set_capacity_class(capacity_class);
  r.set_zone(zone);
  r.set_price_per_gpu_hour(price);
  r.set_gpu_count(gpus);
  return r;
}

TEST(LedgerRowsTest, ASelfHostedRowCarriesItsWorkersAndIsPricedByPart) {
  router::AttemptUsage usage;
  usage.prefill_worker = 3;
  usage.decode_worker = 4;
  usage.prefill_info = Registered("p", "reserved", "zone-a", 3.6, 2);
  usage.decode_info = Registered("d", "burst", "zone-b", 7.2, 1);
  usage.prefill_step_seconds = 1.5;
  usage.decode_step_seconds = 4;
  usage.kv_bytes = 3'000'000'000;
  ledger::AttemptRow row;
  PriceRow(usage, 0.02, &row);
  EXPECT_EQ(row.prefill_worker.id, 3u);
  EXPECT_EQ(row.prefill_worker.capacity_class, CapacityClass::kReserved);
  EXPECT_EQ(row.decode_worker.capacity_class, CapacityClass::kBurst);
  EXPECT_EQ(row.decode_worker.zone, "zone-b");
  EXPECT_EQ(row.kv_bytes, 3'000'000'000);
  EXPECT_DOUBLE_EQ(row.cost.prefill_compute_usd, 0.003);
  EXPECT_DOUBLE_EQ(row.cost.decode_compute_usd, 0.008);
  EXPECT_DOUBLE_EQ(row.cost.egress_usd, 0.06);
  EXPECT_EQ(row.cost.api_tokens_usd, 0);

  usage.decode_worker = 0;  // it never reached a decode worker
  usage.decode_info = {};
  usage.decode_step_seconds = 0;
  PriceRow(usage, 0.02, &row);
  EXPECT_EQ(row.decode_worker.capacity_class, CapacityClass::kNone);
  EXPECT_EQ(row.cost.decode_compute_usd + row.cost.egress_usd, 0);
}

TEST(LedgerRowsTest, AnExternalRowIsClassApiAndCostsItsTokensAtTheSheetsPrices) {
  router::UpstreamConfig upstream;
  upstream.name = "openai";
  upstream.input_cost_per_token = 1.5e-07;
  upstream.output_cost_per_token = 6e-07;
  ledger::AttemptRow row;
  row.kv_bytes = 99;  // whatever was there is replaced
  PriceExternalRow(upstream, 1234, 0, 567, &row);
  EXPECT_EQ(row.prefill_worker.id, 0u);
  EXPECT_EQ(row.decode_worker.name, "openai");
  EXPECT_EQ(row.decode_worker.capacity_class, CapacityClass::kApi);
  EXPECT_EQ(row.prefill_worker.capacity_class, CapacityClass::kApi);
  EXPECT_EQ(row.prompt_tokens, 1234);
  EXPECT_EQ(row.completion_tokens, 567);
  EXPECT_EQ(row.kv_bytes, 0);
  EXPECT_EQ(row.prefill_step_seconds + row.decode_step_seconds, 0);
  EXPECT_EQ(row.cost.prefill_compute_usd + row.cost.decode_compute_usd + row.cost.egress_usd, 0);
  const volatile double input = 1234.0 * 1.5e-07, output = 567.0 * 6e-07;  // not fused
  EXPECT_EQ(row.cost.api_tokens_usd, input + output);
  EXPECT_EQ(row.cost.total(), input + output);
}

TEST(LedgerRowsTest, AnExternalRowsCachedPromptTokensCostTheCachedPriceOrTheInputPrice) {
  router::UpstreamConfig upstream;
  upstream.name = "openai";
  upstream.input_cost_per_token = 2e-06;
  upstream.output_cost_per_token = 8e-06;
  ledger::AttemptRow row;
  PriceExternalRow(upstream, 1000, 600, 10, &row);  // the sheet gave no cached price
  EXPECT_EQ(row.cached_prompt_tokens, 600);
  EXPECT_DOUBLE_EQ(row.cost.api_tokens_usd, 1000 * 2e-06 + 10 * 8e-06);
  upstream.cached_input_cost_per_token = 5e-07;
  PriceExternalRow(upstream, 1000, 600, 10, &row);
  EXPECT_DOUBLE_EQ(row.cost.api_tokens_usd, 400 * 2e-06 + 600 * 5e-07 + 10 * 8e-06);
  PriceExternalRow(upstream, 1000, 5000, 10, &row);  // an API claiming more than the prompt
  EXPECT_EQ(row.cached_prompt_tokens, 1000);
  EXPECT_DOUBLE_EQ(row.cost.api_tokens_usd, 1000 * 5e-07 + 10 * 8e-06);
}

}  // namespace
}  // namespace pdserve::gateway
