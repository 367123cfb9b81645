// Result JSON (vLLM's field names), CSV, summary table and the self-contained HTML page.
#include "bench/serve/report.h"

#include <gtest/gtest.h>

#include <limits>

#include "bench/serve/html_report.h"

namespace pdserve::bench {
namespace {

ServeSession TwoRunSession() {
  ServeSession session;
  session.config.model = "m";
  session.config.label = "<script>alert(1)</script>";
  session.config.gpu_hour_price = 2.0;
  session.date = "2026-11-29T00:00:00Z";
  session.percentiles = {50, 99.9};
  session.slo.ttft_ms = 150;
  for (double rate : {10.0, std::numeric_limits<double>::infinity()}) {
    ServeRun run;
    run.request_rate = rate;
    run.load.duration_s = 2.0;
    RequestRecord ok;
    ok.success = true;
    ok.ttft_s = 0.1;
    ok.latency_s = 0.5;
    ok.output_tokens = 5;
    ok.chunks = 5;
    ok.itl_s = {0.1, 0.1, 0.1, 0.1};
    ok.prompt_tokens = 10;
    RequestRecord failed;
    failed.failure = FailureKind::kHttpStatus;
    failed.error = "HTTP 500: boom";
    run.load.records = {ok, ok, failed};
    run.metrics = CalculateMetrics(run.load.records, 2.0, session.percentiles, session.slo);
    run.cost = ComputeCost(run.metrics, 2.0, 2.0, 4, true);
    session.runs.push_back(run);
  }
  return session;
}

TEST(Report, RunJsonUsesVllmFieldNames) {
  ServeSession session = TwoRunSession();
  auto j = RunResultJson(session, session.runs[1]);
  for (const char* key : {"date",
                          "backend",
                          "model_id",
                          "num_prompts",
                          "request_rate",
                          "burstiness",
                          "max_concurrency",
                          "duration",
                          "completed",
                          "failed",
                          "total_input_tokens",
                          "total_output_tokens",
                          "request_throughput",
                          "request_goodput",
                          "output_throughput",
                          "total_token_throughput",
                          "input_lens",
                          "output_lens",
                          "ttfts",
                          "itls",
                          "errors",
                          "mean_ttft_ms",
                          "median_ttft_ms",
                          "std_ttft_ms",
                          "p50_ttft_ms",
                          "p99.9_ttft_ms",
                          "mean_tpot_ms",
                          "p99.9_tpot_ms",
                          "mean_itl_ms",
                          "median_itl_ms",
                          "mean_e2el_ms",
                          "p99.9_e2el_ms",
                          "max_concurrent_requests",
                          "max_output_tokens_per_s"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["request_rate"], "inf");
  EXPECT_EQ(j["completed"], 2);
  EXPECT_EQ(j["total_output_tokens"], 10);
  EXPECT_EQ(j["ttfts"].size(), 3u);
  EXPECT_EQ(j["ttfts"][2], 0.0);  // failed requests read as 0, as in vLLM
  EXPECT_EQ(j["errors"][2], "HTTP 500: boom");
  EXPECT_EQ(j["failures_by_reason"]["http_status"], 1);
  EXPECT_DOUBLE_EQ(j["request_goodput"].get<double>(), 1.0);
  // 2 USD x 4 GPUs x 2 s = 0.004444 USD over 2 requests and 10 output tokens.
  EXPECT_NEAR(j["cost"]["usd_per_request"].get<double>(), 2.0 * 4 * 2 / 3600 / 2, 1e-12);
  EXPECT_NEAR(j["cost"]["usd_per_1m_output_tokens"].get<double>(), 2.0 * 4 * 2 / 3600 / 10 * 1e6,
              1e-6);
  EXPECT_FALSE(j.contains("generated_texts"));
  auto sweep = SessionResultJson(session);
  ASSERT_EQ(sweep["runs"].size(), 2u);
  EXPECT_EQ(sweep["runs"][0]["request_rate"], 10.0);
}

TEST(Report, SummaryTableAndCsv) {
  ServeSession session = TwoRunSession();
  std::string table = SummaryTable(session, session.runs[0]);
  EXPECT_NE(table.find("============ Serving Benchmark Result ============"), std::string::npos);
  EXPECT_NE(table.find("Successful requests:                     2"), std::string::npos);
  EXPECT_NE(table.find("Request goodput (req/s):"), std::string::npos);
  EXPECT_NE(table.find("P99.9 TTFT (ms):"), std::string::npos);
  EXPECT_NE(table.find("http_status:"), std::string::npos);
  EXPECT_NE(table.find("Cost per 1M output tokens (USD):"), std::string::npos);
  std::string csv = ResultCsv(session);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);
  EXPECT_NE(csv.find("p99.9_e2el_ms"), std::string::npos);
  EXPECT_NE(csv.find(",inf,"), std::string::npos);
}

TEST(Report, HtmlIsSelfContainedAndEscaped) {
  ServeSession session = TwoRunSession();
  std::string html = HtmlReport("t", session, {{"Environment", {{"gpu", "H100 <80GB>"}}}});
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("TTFT distribution"), std::string::npos);
  EXPECT_NE(html.find("H100 &lt;80GB&gt;"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // the label is escaped
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  // Nothing that a browser would fetch: no links, imports or external styles.
  for (const char* fetch : {"<link", "url(", "@import", "<img", "<iframe"}) {
    EXPECT_EQ(html.find(fetch), std::string::npos) << fetch;
  }
  ServeSession empty;
  EXPECT_NE(HtmlReport("t", empty, {}).find("</html>"), std::string::npos);
}

}  // namespace
}  // namespace pdserve::bench
