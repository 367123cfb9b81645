// Admission's predictions against outcomes (ledger/prediction_figures.h), on rows chosen so
// every figure is worked out by hand, and in the cost report: refused rows count as decisions
// only, never as attempts or cost.
#include "ledger/prediction_figures.h"

#include <gtest/gtest.h>

#include "ledger/cost_report.h"
#include "ledger/cost_report_html.h"

namespace pdserve::ledger {
namespace {

const WorkerRef kPrefill{1, "p1", "prefill", CapacityClass::kReserved, "", 3.6, 1};
const WorkerRef kBurst{2, "p2", "prefill", CapacityClass::kBurst, "", 7.2, 1};
const WorkerRef kDecode{3, "d1", "decode", CapacityClass::kReserved, "", 3.6, 1};

// An admitted request of `tenant` that arrived at 100 s, predicted `predicted` s to its first
// token and `queue` s before its prompt started, and measured `ttft` and `measured_queue`.
AttemptRow Admitted(const std::string& id, const std::string& tenant, double predicted,
                    double queue, double ttft, double measured_queue,
                    const WorkerRef& prefill = kPrefill) {
  AttemptRow r;
  r.request_id = id;
  r.tenant = tenant;
  r.status = AttemptStatus::kOk;
  r.admission = "admitted";
  r.predicted_ttft_seconds = predicted;
  r.predicted_queue_seconds = queue;
  r.arrival_unix = 100;
  r.first_token_unix = 100 + ttft;
  r.end_unix = 100 + ttft + 1;
  r.queue_seconds = measured_queue;
  r.prefill_worker = prefill;
  r.decode_worker = kDecode;
  r.prompt_tokens = 10;
  r.completion_tokens = 5;
  return r;
}

TEST(PredictionFiguresTest, ErrorsMatchTheHandComputedOnes) {
  PredictionFigures f;
  // Errors (predicted - measured): +0.5, -0.5, +1.0, 0 s on measured 1, 2, 1, 4 s.
  f.Add(Admitted("a", "t", 1.5, 1.0, 1.0, 0.5));
  f.Add(Admitted("b", "t", 1.5, 1.0, 2.0, 1.0));
  f.Add(Admitted("c", "t", 2.0, 1.0, 1.0, 0.5, kBurst));
  f.Add(Admitted("d", "t", 4.0, 2.0, 4.0, 2.0));
  const auto s = Summarise(f.ttft);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->count, 4);
  EXPECT_DOUBLE_EQ(s->bias, (0.5 - 0.5 + 1.0 + 0) / 4);
  // |errors| sorted 0, 0.5, 0.5, 1.0: nearest-rank median the 2nd, p90 the 4th.
  EXPECT_DOUBLE_EQ(s->median_abs_error, 0.5);
  EXPECT_DOUBLE_EQ(s->p90_abs_error, 1.0);
  // Relative: 0.5, 0.25, 1.0, 0 -> sorted 0, 0.25, 0.5, 1.0.
  EXPECT_DOUBLE_EQ(*s->median_abs_relative_error, 0.25);
  EXPECT_DOUBLE_EQ(*s->p90_abs_relative_error, 1.0);
  EXPECT_DOUBLE_EQ(*s->relative_bias, 1.0 / 8);
  const auto queue = Summarise(f.queue_wait);
  ASSERT_TRUE(queue.has_value());
  EXPECT_DOUBLE_EQ(queue->bias, (0.5 + 0 + 0.5 + 0) / 4);
  ASSERT_EQ(f.ttft_by_pool.size(), 2u);
  EXPECT_EQ(Summarise(f.ttft_by_pool.at("prefill/burst"))->count, 1);
  EXPECT_EQ(Summarise(f.ttft_by_pool.at("prefill/reserved"))->count, 3);
  EXPECT_EQ(f.decisions.at("admitted"), 4);
}

TEST(PredictionFiguresTest, OnlyAdmittedRequestsWithAPredictionAndAFirstTokenAreCompared) {
  PredictionFigures f;
  AttemptRow refused = Admitted("r", "t", 9, 8, 0, 0);
  refused.status = AttemptStatus::kRefused;
  refused.admission = "refused";
  refused.first_token_unix = 0;
  refused.prefill_worker = {};
  f.Add(refused);
  AttemptRow overflowed = Admitted("o", "t", 9, 8, 0.3, 0);
  overflowed.admission = "overflowed";  // the API's TTFT is not what was predicted
  f.Add(overflowed);
  f.Add(Admitted("n", "t", 0, 0, 1.0, 0.1));  // nothing predicted (no rate measured yet)
  AttemptRow retried = Admitted("x", "t", 2, 1, 0, 0);
  retried.status = AttemptStatus::kRetried;
  retried.first_token_unix = 0;  // its second attempt's row has the first token
  f.Add(retried);
  AttemptRow second = Admitted("x", "t", 2, 1, 2.5, 1.2);
  second.attempt = 2;
  f.Add(second);
  EXPECT_EQ(f.decisions.at("refused"), 1);
  EXPECT_EQ(f.decisions.at("overflowed"), 1);
  EXPECT_EQ(f.decisions.at("admitted"), 2) << "the retried request counts once";
  const auto s = Summarise(f.ttft);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->count, 1);
  EXPECT_DOUBLE_EQ(s->bias, -0.5);
  EXPECT_FALSE(Summarise(PredictionErrors{}).has_value());
}

TEST(PredictionFiguresTest, TheReportCountsRefusedRowsAsDecisionsOnly) {
  AttemptRow refused = Admitted("r", "light", 9, 8, 0, 0);
  refused.status = AttemptStatus::kRefused;
  refused.admission = "refused";
  refused.first_token_unix = 0;
  refused.prefill_worker = refused.decode_worker = {};
  refused.completion_tokens = 0;
  const std::vector<AttemptRow> rows = {Admitted("a", "heavy", 1.5, 1.0, 1.0, 0.5), refused};
  const CostReport report = BuildCostReport(rows, {}, {}, {});
  EXPECT_EQ(report.overall.requests, 1);
  EXPECT_EQ(report.overall.attempts, 1) << "a refused request never ran";
  EXPECT_EQ(report.overall.failed_attempts, 0);
  const nlohmann::json j = CostReportJson(report);
  const nlohmann::json& p = j["predictions"];
  EXPECT_EQ(p["decisions"]["admitted"], 1);
  EXPECT_EQ(p["decisions"]["refused"], 1);
  EXPECT_EQ(p["ttft"]["count"], 1);
  EXPECT_DOUBLE_EQ(p["ttft"]["bias"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(p["ttft"]["median_abs_relative_error"].get<double>(), 0.5);
  EXPECT_EQ(p["ttft_by_pool"]["prefill/reserved"]["count"], 1);
  EXPECT_EQ(p["by_tenant"]["light"]["decisions"]["refused"], 1);
  EXPECT_TRUE(p["by_tenant"]["light"]["ttft"].is_null());
  EXPECT_EQ(p["by_tenant"]["heavy"]["ttft"]["count"], 1);
  const std::string table = CostReportTable(report);
  EXPECT_NE(table.find("admission       admitted 1, refused 1"), std::string::npos) << table;
  EXPECT_NE(table.find("predicted TTFT  n=1 median |err| 0.500 s (50%)"), std::string::npos)
      << table;
  const std::string html = CostReportHtml(report);
  EXPECT_NE(html.find("<h3>Predictions against outcomes</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td>tenant light</td><td>refused 1</td>"), std::string::npos) << html;
}

}  // namespace
}  // namespace pdserve::ledger
