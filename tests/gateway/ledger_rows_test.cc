// An external attempt's ledger row (gateway/ledger_rows.h): its upstream as both workers, class
// api, and a cost of exactly the sheet's token prices times the tokens given.
#include "gateway/ledger_rows.h"

#include <gtest/gtest.h>

namespace pdserve::gateway {
namespace {

TEST(LedgerRowsTest, AnExternalRowIsClassApiAndCostsItsTokensAtTheSheetsPrices) {
  router::UpstreamConfig upstream;
  upstream.name = "openai";
  upstream.input_cost_per_token = 1.5e-07;
  upstream.output_cost_per_token = 6e-07;
  AttemptRow row;
  row.kv_bytes = 99;  // whatever was there is replaced
  PriceExternalRow(upstream, 1234, 567, &row);
  EXPECT_EQ(row.prefill_worker.id, 0u);
  EXPECT_EQ(row.decode_worker.name, "openai");
  EXPECT_EQ(row.decode_worker.capacity_class, kApiClass);
  EXPECT_EQ(row.prefill_worker.capacity_class, kApiClass);
  EXPECT_EQ(row.prompt_tokens, 1234);
  EXPECT_EQ(row.completion_tokens, 567);
  EXPECT_EQ(row.kv_bytes, 0);
  EXPECT_EQ(row.prefill_step_seconds + row.decode_step_seconds + row.egress_cost_usd, 0);
  const volatile double input = 1234.0 * 1.5e-07, output = 567.0 * 6e-07;  // not fused
  EXPECT_EQ(row.cost_usd, input + output);
  EXPECT_EQ(row.cost_usd, ExternalCostUsd(upstream, 1234, 567));
  EXPECT_EQ(ExternalCostUsd(upstream, 0, 0), 0);
}

}  // namespace
}  // namespace pdserve::gateway
