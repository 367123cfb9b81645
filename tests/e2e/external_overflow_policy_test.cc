// End to end: the overflow policies under load, on the fixture of external_overflow_fixture.h:
// at ten times the workers' capacity goodput stays at or above 95%; overflow=cheapest sends a
// tenant where its tokens cost less; an overflow waits for a burst worker due within its
// objective. Routing, pricing and failures: external_overflow_test.cc.
#include <gtest/gtest.h>

#include "tests/e2e/external_overflow_fixture.h"

namespace pdserve::overflow_test {
namespace {

TEST_F(ExternalOverflowTest, TenTimesTheWorkersCapacityKeepsGoodputAbove95Percent) {
  std::ofstream(dir_ / "per_token.json") << R"({
      "name": "per_token", "device": "test",
      "prefill": {"base": 0.01, "per_token": 0.02, "per_context": 0},
      "decode": {"base": 0.005, "per_token": 0, "per_context": 0},
      "range": {"prompt_tokens": 4096, "decode_tokens": 256, "max_context": 4096},
      "kv_bytes_per_token": 65536, "kv_bytes_per_second": 1e9, "n_layers": 2,
      "page_size": 16, "kv_pages": 2048, "cold_start_seconds": 0})";
  Start({}, "per_token.json", /*expect_refusal=*/false);
  const int64_t before = fake_->requests_received();
  ::setenv("PDSERVE_OVERFLOW_TEST_KEY", "sk-load", 1);
  Process bench({"bench",
                 "serve",
                 "--base-url",
                 "http://127.0.0.1:" + std::to_string(http_),
                 "--model",
                 "tiny",
                 "--api-key-env",
                 "PDSERVE_OVERFLOW_TEST_KEY",
                 "--tokenizer",
                 model_,
                 "--num-prompts",
                 "300",
                 "--random-input-len",
                 "16",
                 "--random-output-len",
                 "8",
                 "--request-rate",
                 "30",
                 "--goodput",
                 "ttft:1000",
                 "--result-json",
                 dir_ / "bench.json",
                 "--progress",
                 "off"},
                dir_ / "bench.log");
  ASSERT_EQ(bench.Wait(std::chrono::seconds(120)), 0) << testing::ReadLog(dir_ / "bench.log");
  const Json result = testing::WaitForJsonFile(dir_ / "bench.json", std::chrono::seconds(5));
  ASSERT_TRUE(result.is_object()) << testing::ReadLog(dir_ / "bench.log");
  const int64_t external = fake_->requests_received() - before;
  const double goodput = result["good_completed"].get<double>() / 300;
  std::printf(
      "300 requests at 30/s: %lld to the upstream, %lld completed, %lld failed, goodput "
      "%.3f, p99 TTFT %.0f ms\n",
      static_cast<long long>(external), result["completed"].get<long long>(),
      result["failed"].get<long long>(), goodput, result.value("p99_ttft_ms", -1.0));
  EXPECT_EQ(result["failed"], 0) << result["errors"].dump();
  EXPECT_GE(goodput, 0.95);
  EXPECT_GT(external, 0);
  EXPECT_LT(external, 300) << "the workers served none of it";
  // Every request the upstream got was sent for a predicted miss (at admission, or once waiting
  // on would miss), none for anything else.
  const double predicted = std::max(
      0.0,
      testing::MetricValue(
          http_, "pdserve_external_requests_total{reason=\"predicted_wait\",upstream=\"fake\"}"));
  const double waited = std::max(
      0.0, testing::MetricValue(
               http_, "pdserve_external_requests_total{reason=\"queue_wait\",upstream=\"fake\"}"));
  std::printf("to the upstream: %.0f refused at admission, %.0f after waiting\n", predicted,
              waited);
  EXPECT_EQ(predicted + waited, external);
  EXPECT_EQ(testing::MetricSum(http_, "pdserve_external_requests_total"), external);

  // The report shows the mix and what the overflow cost, beside what burst would have charged.
  const std::string ledger_and_prices = " --ledger " + std::string(dir_ / "ledger.sqlite") +
                                        " --prices " + std::string(dir_ / "prices.json");
  const auto run = testing::RunPdserveWithOutput("report --format json" + ledger_and_prices);
  const Json report = Json::parse(run.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << "exit " << run.exit_code << ": " << run.err << run.out;
  const Json& overall = report["overall"];
  const Json& mix = overall["mix"];
  ASSERT_TRUE(mix.contains("api fake") && mix.contains("reserved")) << mix.dump();
  EXPECT_EQ(mix["api fake"]["requests"], external);
  // The warm-up's request is the workers' too.
  EXPECT_EQ(mix["reserved"]["requests"].get<int64_t>() + external, 300 + 1) << mix.dump();
  const Json& e = overall["external_apis"]["fake"];
  EXPECT_EQ(e["requests"], external);
  EXPECT_GT(e["cost_usd"].get<double>(), 0);
  // No burst capacity ran: nothing to price the overflow's tokens at, said as null.
  EXPECT_TRUE(e["on_burst_compute_usd"].is_null()) << e.dump();
  const std::string table = testing::RunPdserve("report" + ledger_and_prices);
  EXPECT_NE(table.find("Mix (accepted requests)"), std::string::npos) << table;
  EXPECT_NE(table.find("api fake"), std::string::npos) << table;
}

// `cheapest`: where the tokens cost less. Workers at $36,000 a GPU-hour (a 0.5 s prompt step
// costs $5) are dearer than the sheet's upstream for any request once their cost is known.
TEST_F(ExternalOverflowTest, CheapestTenantsGoToTheUpstreamWhenTheWorkersCostMore) {
  Start({}, "slow.json", /*expect_refusal=*/false, 0, {}, {"--price-per-gpu-hour", "36000"});
  // The warm-up's request was charged: the workers' rates are known.
  for (int i = 1; i <= 3; ++i) {
    const HttpResponse r = Post("sk-cheap", Completion(4, i % 2 == 0));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(fake_->requests_received(), i);
  }
  EXPECT_EQ(testing::MetricValue(
                http_, "pdserve_external_requests_total{reason=\"cheapest\",upstream=\"fake\"}"),
            3);
  // A never tenant stays on the dear workers all the same.
  ASSERT_EQ(Post("sk-never", Completion(4, false)).status, 200);
  EXPECT_EQ(fake_->requests_received(), 3);
}

// Free workers (no price) cost less than any upstream: a cheapest tenant stays on them.
TEST_F(ExternalOverflowTest, CheapestTenantsStayOnWorkersThatCostLess) {
  Start();  // until admission predicts that the prompts miss a tight objective
  for (int i = 0; i < 3; ++i) {
    const HttpResponse r = Post("sk-cheap", Completion(4, false));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(fake_->requests_received(), 0);
  // Under an objective the workers would miss it still overflows, as `overflow` does.
  ASSERT_EQ(Post("sk-cheap", Completion(4, false), kTightSlo).status, 200);
  EXPECT_EQ(fake_->requests_received(), 1);
}

// A burst worker the planner asked for, due early enough to prefill the request's prompt within
// its objective, is waited for rather than overflowing; one overdue by a whole cold start again
// is not counted on. The planner (advise: nobody starts the worker) asks for a prefill worker
// once admission refuses never tenants; the cold start is assumed to be 4 s, so the ask is due
// from 4 s to 8 s after it is made and due now in between. Each request is sent while another
// holds the one prefill worker (a step of 0.5 s), so that admission predicts about 1 s against
// its 1 s objective and refuses it: a burst worker due now would take its 0.5 s prompt in time.
TEST_F(ExternalOverflowTest, AnOverflowWaitsForABurstWorkerDueWithinItsObjective) {
  Start({}, "slow.json", /*expect_refusal=*/true, 0,
        {"--planner", "advise", "--planner-prefill", "1:3", "--planner-decode", "1:3",
         "--planner-interval", "0.5", "--burst-cold-start-seconds", "4"});
  const std::string desired = "pdserve_planner_desired_workers{class=\"burst\",pool=\"prefill\"}";
  ASSERT_TRUE(WaitFor(
      [&] {
        if (testing::MetricValue(http_, desired) >= 1) return true;
        Post("sk-never", Completion(4, false), kTightSlo);  // refused: the planner's signal
        return false;
      },
      std::chrono::seconds(30)))
      << "the planner never asked for a burst prefill worker";
  const auto asked = Clock::now();  // the ask was made at most half a second before
  const std::vector<std::string> second_slo{"x-pdserve-ttft-slo-ms: 1000"};
  // Sends `key`'s request while a never tenant's holds the prefill worker.
  auto post_behind_another = [&](const std::string& key) {
    std::thread other([&] { Post("sk-never", Completion(4, false)); });
    EXPECT_TRUE(
        WaitFor([&] { return testing::MetricValue(http_, "pdserve_num_requests_running") >= 1; },
                std::chrono::seconds(5)));
    const HttpResponse r = Post(key, Completion(4, false), second_slo);
    other.join();
    return r;
  };
  std::this_thread::sleep_until(asked + std::chrono::seconds(5));
  const HttpResponse waited = post_behind_another("sk-over");
  ASSERT_EQ(waited.status, 200) << waited.body;
  EXPECT_EQ(fake_->requests_received(), 0) << "it overflowed with a burst worker due";
  EXPECT_EQ(testing::MetricSum(http_, "pdserve_overflow_deferred_total"), 1);
  // An objective of 100 ms is shorter than the prompt's 0.5 s: the worker due now cannot help.
  const HttpResponse tight = Post("sk-over", Completion(4, false), kTightSlo);
  ASSERT_EQ(tight.status, 200) << tight.body;
  EXPECT_EQ(fake_->requests_received(), 1) << "it waited for a burst worker too late for it";
  std::this_thread::sleep_until(asked + std::chrono::seconds(9));
  const HttpResponse overflowed = post_behind_another("sk-over");
  ASSERT_EQ(overflowed.status, 200) << overflowed.body;
  EXPECT_EQ(fake_->requests_received(), 2) << "the lost burst worker was still waited for";
  EXPECT_EQ(testing::MetricSum(http_, "pdserve_overflow_deferred_total"), 1);
}

}  // namespace
}  // namespace pdserve::overflow_test
