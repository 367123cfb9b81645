// Tests for gateway/completion_call_overflow.cc and the call's pricing: a request overflows to
// an external upstream for each reason the overflow policy gives (cheapest, predicted_wait,
// queue_wait, retry), waits for a burst worker due in time, is refused with no_allowed_route;
// a client leaving an external attempt cancels it; and an attempt is priced once: its ledger
// row, its header and its usage.cost_usd carry one figure; cached prompt tokens reach the usage
// and the row (a worker's first-token batch, an API's usage), priced at the cached-input price on
// an API; every row holds admission's decision and its prediction, and a request that never ran
// leaves a row of status refused. Fakes for both upstreams; no sockets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "gateway/completion_call.h"
#include "tests/fakes/fake_attempt_upstream.h"
#include "tests/gateway/gateway_test_support.h"

namespace pdserve::gateway {
namespace {

using testing::Ids;
using testing::TestTokenizer;

std::filesystem::path TestDir() {
  return std::filesystem::path(PDSERVE_TEST_TMP) / "completion_call_overflow_test" /
         std::to_string(::getpid());
}

router::UpstreamConfig Upstream(const std::string& name, double input, double output) {
  router::UpstreamConfig c;
  c.name = name;
  c.url = "http://127.0.0.1:1/v1";
  c.input_cost_per_token = input;
  c.output_cost_per_token = output;
  return c;
}

// The ledger's rows once the call's writer has committed them.
std::vector<ledger::AttemptRow> CommittedRows(const CallAccounting& accounting) {
  EXPECT_TRUE(accounting.ledger->Flush(std::chrono::seconds(10)));
  return accounting.ledger->ledger().Rows({}).value();
}

class OverflowTest : public ::testing::Test {
 protected:
  OverflowTest() {
    queue = std::make_shared<router::AdmissionQueue>([this] { return workers->prefill; },
                                                     [this] { return now; });
    upstreams = std::make_shared<router::ExternalUpstreams>(std::vector<router::UpstreamConfig>{
        Upstream("cheap", 1e-6, 2e-6), Upstream("dear", 1e-5, 2e-5)});
  }

  std::shared_ptr<CompletionCall> Make(router::OverflowRule rule, std::chrono::milliseconds slo,
                                       CallAccounting accounting = {}, bool stream = false) {
    GenerationRequest r;
    r.model = "m";
    r.prompt = "hello world";
    r.stream = stream;
    r.include_usage = true;
    r.ignore_eos = true;
    CallAdmission a;
    a.queue = queue;
    a.deadline = now + std::chrono::seconds(30);
    a.ttft_slo = slo;
    a.overflow = rule;
    CallOutput output;
    output.write_stream = [this](std::string data) { streamed += data; };
    output.finish = [this](int s, std::string b, HttpHeaders h, bool) {
      ++finished;
      status = s;
      body = std::move(b);
      headers = std::move(h);
    };
    auto call = std::make_shared<CompletionCall>(io.get_executor(), CallWorkers{workers, workers},
                                                 TestTokenizer(), std::move(r), Ids("hello world"),
                                                 8, "req-1", "m", std::move(output), metrics,
                                                 std::move(a), std::move(accounting));
    CallOverflow o;
    o.rule = rule;
    o.upstreams = upstreams;
    o.attempts = external;
    o.next_burst = [this] { return next_burst; };
    call->AllowOverflow(std::move(o));
    return call;
  }

  // Admission predicts a wait of about 100 s for any prompt.
  void Backlogged() {
    workers->prefill.tokens_per_second = 10;
    workers->prefill.queued_prompt_tokens = 1000;
    workers->prefill.queued_prompt_seconds = 100;
    workers->prefill.workers = 1;
  }

  void Run() { testing::RunReady(io); }

  // Accounting into a fresh ledger file named `name`.
  CallAccounting LedgerAccounting(const std::string& name) {
    std::filesystem::create_directories(TestDir());
    const std::string path = (TestDir() / (name + ".sqlite")).string();
    std::filesystem::remove(path);
    CallAccounting accounting;
    accounting.ledger =
        std::make_shared<ledger::LedgerWriter>(ledger::Ledger::Open({path}).value());
    return accounting;
  }

  std::string Header(const std::string& name) const { return testing::HeaderValue(headers, name); }

  // The external attempt answers " a b" and its usage.
  void ExternalAnswers(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached = 0) {
    const auto& s = external->last();
    s.listener.lock()->AttemptText(s.spec.id, " a b");
    s.listener.lock()->AttemptFinished(s.spec.id, "stop", prompt_tokens, completion_tokens);
    AttemptUse use;
    use.workers.attempt_id = s.spec.id;
    use.upstream = s.spec.upstream;
    use.api_prompt_tokens = prompt_tokens;
    use.api_completion_tokens = completion_tokens;
    use.api_cached_prompt_tokens = cached;
    s.listener.lock()->AttemptClosed(use);
  }

  boost::asio::io_context io;
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  std::shared_ptr<FakeAttemptUpstream> workers = std::make_shared<FakeAttemptUpstream>();
  std::shared_ptr<FakeAttemptUpstream> external = std::make_shared<FakeAttemptUpstream>();
  std::shared_ptr<GatewayMetrics> metrics = std::make_shared<GatewayMetrics>();
  std::shared_ptr<router::AdmissionQueue> queue;
  std::shared_ptr<router::ExternalUpstreams> upstreams;
  std::optional<std::chrono::system_clock::time_point> next_burst;
  int finished = 0, status = 0;
  std::string streamed, body;
  HttpHeaders headers;
};

TEST_F(OverflowTest, APredictedMissGoesToTheCheapestUpstream) {
  Backlogged();
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(1000));
  ASSERT_TRUE(call->Start());
  Run();
  EXPECT_TRUE(workers->started.empty());
  ASSERT_EQ(external->started.size(), 1u);
  EXPECT_EQ(external->last().spec.upstream, 0);
  ExternalAnswers(2, 3);
  Run();
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(status, 200);
  const auto json = nlohmann::json::parse(body);
  EXPECT_EQ(json["choices"][0]["text"], " a b");
  EXPECT_EQ(json["usage"]["completion_tokens"], 3);
  EXPECT_DOUBLE_EQ(json["usage"]["cost_usd"].get<double>(), 2 * 1e-6 + 3 * 2e-6);
}

TEST_F(OverflowTest, WithoutOverflowRightsAPredictedMissIs429) {
  Backlogged();
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(1000));
  EXPECT_FALSE(call->Start());
  EXPECT_EQ(status, 429);
  EXPECT_NE(body.find("predicted_wait_exceeds_slo"), std::string::npos);
  EXPECT_TRUE(external->started.empty());
}

TEST_F(OverflowTest, NoHealthyUpstreamIsNoAllowedRoute) {
  Backlogged();
  for (int i = 0; i < 3; ++i) {
    upstreams->Record(0, false);
    upstreams->Record(1, false);
  }
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(1000));
  EXPECT_FALSE(call->Start());
  EXPECT_EQ(status, 503);
  EXPECT_NE(body.find("no_allowed_route"), std::string::npos);
  EXPECT_NE(body.find("no external upstream can take it"), std::string::npos);
  EXPECT_FALSE(Header("retry-after").empty());
}

TEST_F(OverflowTest, ABurstWorkerDueInTimeIsWaitedFor) {
  Backlogged();
  workers->room = false;
  next_burst = std::chrono::system_clock::now();
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(5000));
  ASSERT_TRUE(call->Start());
  Run();
  EXPECT_TRUE(external->started.empty());
  EXPECT_EQ(queue->waiting(), 1u);
  workers->room = true;
  EXPECT_EQ(queue->Pump(), 1);
  Run();
  EXPECT_EQ(workers->started.size(), 1u);
}

// Refused for its 5 s objective, it waits for a burst worker due 4.5 s after it arrived (its
// 2-token prompt then takes 0.2 s at 10 tokens a second), but only until its overflow time (5 s
// less its prompt's time): the worker that never comes, or comes late, is not waited for past
// that, and it leaves for an upstream, not for its queue deadline (30 s).
TEST_F(OverflowTest, ABurstWorkerThatDoesNotComeInTimeIsWaitedForOnlyUntilTheOverflowTime) {
  Backlogged();
  workers->room = false;
  const auto arrived = std::chrono::system_clock::now();
  next_burst = arrived + std::chrono::milliseconds(4500);
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(5000));
  ASSERT_TRUE(call->Start());
  Run();
  EXPECT_TRUE(external->started.empty());
  EXPECT_EQ(queue->waiting(), 1u) << "it waits for the burst worker due in time";
  now += std::chrono::milliseconds(4000);
  EXPECT_EQ(queue->Expire(), 0) << "its overflow time is 4.8 s after it arrived";
  // At 4.8 s the worker is still not there: due now, too late for the prompt to make 5 s.
  now += std::chrono::milliseconds(900);
  next_burst = arrived + std::chrono::milliseconds(4900);
  EXPECT_EQ(queue->Expire(), 1);
  Run();
  ASSERT_EQ(external->started.size(), 1u) << "it left for an upstream at its overflow time";
  workers->room = true;  // the burst worker comes, late
  EXPECT_EQ(queue->Pump(), 0);
  Run();
  EXPECT_TRUE(workers->started.empty());
  ExternalAnswers(2, 3);
  Run();
  EXPECT_EQ(status, 200);
}

TEST_F(OverflowTest, ACheapestTenantGoesWhereItIsCheaperAtArrival) {
  CallAccounting accounting;
  accounting.rates = std::make_shared<router::SelfHostedRates>();
  accounting.rates->Record(100, 1.0, 100, 1.0);  // a dollar a token: dearer than any upstream
  auto call = Make(router::OverflowRule::kCheapest, std::chrono::milliseconds(0), accounting);
  ASSERT_TRUE(call->Start());
  Run();
  EXPECT_TRUE(workers->started.empty());
  ASSERT_EQ(external->started.size(), 1u);
  EXPECT_EQ(external->last().spec.upstream, 0);
}

TEST_F(OverflowTest, ACheapestTenantStaysWhereWorkersAreCheaper) {
  CallAccounting accounting;
  accounting.rates = std::make_shared<router::SelfHostedRates>();
  accounting.rates->Record(1000000, 1e-9, 1000000, 1e-9);
  auto call = Make(router::OverflowRule::kCheapest, std::chrono::milliseconds(0), accounting);
  ASSERT_TRUE(call->Start());
  Run();
  EXPECT_TRUE(external->started.empty());
  EXPECT_EQ(workers->started.size(), 1u);
}

TEST_F(OverflowTest, ARequestStillWaitingAtItsOverflowTimeLeavesForAnUpstream) {
  workers->room = false;  // no prediction (no measured rate): admitted, then it waits
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(2000));
  ASSERT_TRUE(call->Start());
  Run();
  EXPECT_EQ(queue->waiting(), 1u);
  now += std::chrono::milliseconds(2100);
  EXPECT_EQ(queue->Expire(), 1);
  Run();
  ASSERT_EQ(external->started.size(), 1u);
  EXPECT_TRUE(workers->started.empty());
}

TEST_F(OverflowTest, AFailedUpstreamIsRetriedOnAnotherThenOnWorkers) {
  Backlogged();
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(1000));
  ASSERT_TRUE(call->Start());
  Run();
  AttemptFault fault;
  fault.message = "upstream said 500";
  fault.retryable = true;
  external->Fail(fault);
  external->Close();
  Run();
  ASSERT_EQ(external->started.size(), 2u);
  EXPECT_EQ(external->last().spec.upstream, 1);
  external->Fail(fault);
  external->Close();
  Run();
  // Both upstreams failed: the request waits for self-hosted workers, no longer refused.
  EXPECT_EQ(external->started.size(), 2u);
  EXPECT_EQ(workers->started.size(), 1u);
  workers->SendTokens(Ids(" x"), "stop");
  workers->Close();
  Run();
  EXPECT_EQ(status, 200);
}

TEST_F(OverflowTest, TheClientLeavingCancelsTheExternalAttempt) {
  Backlogged();
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(1000), {},
                   /*stream=*/true);
  ASSERT_TRUE(call->Start());
  Run();
  ASSERT_EQ(external->started.size(), 1u);
  call->Cancel();
  EXPECT_EQ(external->cancelled, std::vector<uint64_t>{external->last_id()});
  EXPECT_TRUE(workers->cancelled.empty());
}

TEST_F(OverflowTest, AnAttemptIsPricedOnceForItsRowItsHeaderAndItsUsage) {
  std::filesystem::create_directories(TestDir());
  const std::string path = (TestDir() / "ledger.sqlite").string();
  std::filesystem::remove(path);
  CallAccounting accounting;
  accounting.ledger = std::make_shared<ledger::LedgerWriter>(ledger::Ledger::Open({path}).value());
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(0), accounting);
  ASSERT_TRUE(call->Start());
  Run();
  ASSERT_EQ(workers->started.size(), 1u);
  workers->SendTokens(Ids(" p q"), "length");
  AttemptUse use;
  use.workers.prefill_worker = 1;
  use.workers.decode_worker = 2;
  use.workers.prefill_info.set_capacity_class("reserved");
  use.workers.prefill_info.set_price_per_gpu_hour(3.7);
  use.workers.prefill_info.set_gpu_count(1);
  use.workers.decode_info.set_capacity_class("burst");
  use.workers.decode_info.set_price_per_gpu_hour(5.3);
  use.workers.decode_info.set_gpu_count(2);
  use.workers.prefill_step_seconds = 0.25;
  use.workers.decode_step_seconds = 0.5;
  workers->Close(use);
  Run();
  ASSERT_EQ(status, 200);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 1u);
  const double row_cost = rows[0].cost.total();
  EXPECT_GT(row_cost, 0);
  EXPECT_DOUBLE_EQ(row_cost, (0.25 * 3.7 * 1 + 0.5 * 5.3 * 2) / 3600);
  EXPECT_EQ(Header("x-pdserve-cost-usd"), ResponseStream::CostText(row_cost));
  EXPECT_EQ(nlohmann::json::parse(body)["usage"]["cost_usd"].get<double>(), row_cost);
}

// A worker's first-token batch with `cached` prompt tokens found in its prefix cache.
void SendCachedTokens(FakeAttemptUpstream& workers, const std::vector<int32_t>& tokens,
                      int32_t cached, const std::string& finish_reason = "") {
  proto::TokenBatch batch;
  for (int32_t t : tokens) batch.add_tokens(t);
  batch.set_cached_tokens(cached);
  batch.set_finish_reason(finish_reason);
  workers.last().listener.lock()->AttemptTokens(workers.last_id(), batch,
                                                std::chrono::steady_clock::now());
}

// The usage object of an SSE stream's usage chunk.
nlohmann::json StreamUsage(const std::string& sse) {
  size_t at = 0;
  while ((at = sse.find("data: {", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    auto chunk = nlohmann::json::parse(sse.substr(at + 6, end - at - 6));
    at = end;
    if (chunk.contains("usage")) return chunk["usage"];
  }
  return nullptr;
}

std::shared_ptr<ledger::LedgerWriter> FreshLedger(const std::string& name) {
  std::filesystem::create_directories(TestDir());
  const std::string path = (TestDir() / name).string();
  std::filesystem::remove(path);
  return std::make_shared<ledger::LedgerWriter>(ledger::Ledger::Open({path}).value());
}

TEST_F(OverflowTest, AWorkersCachedPromptTokensReachTheUsageAndTheRow) {
  const int64_t prompt = static_cast<int64_t>(Ids("hello world").size());
  ASSERT_GE(prompt, 2);
  CallAccounting accounting;
  accounting.ledger = FreshLedger("cached.sqlite");
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(0), accounting);
  ASSERT_TRUE(call->Start());
  Run();
  SendCachedTokens(*workers, Ids(" p"), static_cast<int32_t>(prompt - 1));
  workers->SendTokens(Ids(" q"), "length");
  workers->Close();
  Run();
  ASSERT_EQ(status, 200);
  const auto usage = nlohmann::json::parse(body)["usage"];
  EXPECT_EQ(usage["prompt_tokens"], prompt);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], prompt - 1);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cached_prompt_tokens, prompt - 1);
}

TEST_F(OverflowTest, AStreamsUsageChunkCarriesCachedTokensClampedToThePrompt) {
  const int64_t prompt = static_cast<int64_t>(Ids("hello world").size());
  CallAccounting accounting;
  accounting.ledger = FreshLedger("clamped.sqlite");
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(0), accounting,
                   /*stream=*/true);
  ASSERT_TRUE(call->Start());
  Run();
  SendCachedTokens(*workers, Ids(" p q"), 1000, "length");  // a worker claiming too much
  workers->Close();
  Run();
  ASSERT_EQ(status, 200);
  const auto usage = StreamUsage(streamed + body);
  ASSERT_TRUE(usage.is_object()) << streamed + body;
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], prompt);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cached_prompt_tokens, prompt);
}

TEST_F(OverflowTest, AResumedStreamReportsTheCachedTokensOfTheAttemptThatStartedIt) {
  const int64_t prompt = static_cast<int64_t>(Ids("hello world").size());
  CallAccounting accounting;
  accounting.ledger = FreshLedger("resumed.sqlite");
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(0), accounting,
                   /*stream=*/true);
  ASSERT_TRUE(call->Start());
  Run();
  SendCachedTokens(*workers, Ids(" p"), 1);
  AttemptFault fault;
  fault.message = "decode worker lost";
  fault.retryable = true;
  fault.failed_worker = 3;
  const auto first = workers->last().listener.lock();
  AttemptUse first_use;
  first_use.workers.attempt_id = workers->last_id();
  workers->Fail(fault);  // the resumed attempt may start at once
  first->AttemptClosed(first_use);
  Run();
  ASSERT_EQ(workers->started.size(), 2u);
  // The resumed attempt's worker found the prompt and the token so far cached.
  SendCachedTokens(*workers, Ids(" q"), static_cast<int32_t>(prompt + 1), "length");
  workers->Close();
  Run();
  ASSERT_EQ(status, 200);
  const auto usage = StreamUsage(streamed + body);
  ASSERT_TRUE(usage.is_object()) << streamed + body;
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 1);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].cached_prompt_tokens, 1);
  EXPECT_EQ(rows[1].cached_prompt_tokens, prompt);  // the client's prompt at most
}

TEST_F(OverflowTest, AnApisCachedTokensReachTheUsageAndArePricedAtItsCachedPrice) {
  auto configs = upstreams->configs();
  configs[0].cached_input_cost_per_token = 1e-7;
  upstreams = std::make_shared<router::ExternalUpstreams>(configs);
  Backlogged();
  CallAccounting accounting;
  accounting.ledger = FreshLedger("api.sqlite");
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(1000), accounting);
  ASSERT_TRUE(call->Start());
  Run();
  ASSERT_EQ(external->started.size(), 1u);
  ASSERT_EQ(external->last().spec.upstream, 0);
  ExternalAnswers(10, 3, /*cached=*/8);
  Run();
  ASSERT_EQ(status, 200);
  const auto usage = nlohmann::json::parse(body)["usage"];
  EXPECT_EQ(usage["prompt_tokens"], 10);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 8);
  const double cost = 2 * 1e-6 + 8 * 1e-7 + 3 * 2e-6;
  EXPECT_DOUBLE_EQ(usage["cost_usd"].get<double>(), cost);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cached_prompt_tokens, 8);
  EXPECT_DOUBLE_EQ(rows[0].cost.api_tokens_usd, cost);
}

// Admission predicts 0.5 s for "hello world" (2 tokens at 4 a second) with nothing ahead.
TEST_F(OverflowTest, AnAdmittedRequestsRowHoldsItsPredictionAndTheMetricItsRatio) {
  workers->prefill.tokens_per_second = 4;
  workers->prefill.workers = 1;
  workers->prefill.idle_workers = 1;
  CallAccounting accounting = LedgerAccounting("admitted");
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(5000), accounting);
  ASSERT_TRUE(call->Start());
  Run();
  ASSERT_EQ(workers->started.size(), 1u);
  workers->SendTokens(Ids(" p q"), "length");
  workers->Close();
  Run();
  ASSERT_EQ(status, 200);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].admission, "admitted");
  EXPECT_DOUBLE_EQ(rows[0].predicted_ttft_seconds, 0.5);
  EXPECT_EQ(rows[0].predicted_queue_seconds, 0);  // nothing ahead, a worker idle
  const auto [count, sum] = metrics->TtftPredictions();
  EXPECT_EQ(count, 1u);
  EXPECT_GT(sum, 10) << "0.5 s predicted over the few milliseconds measured";
}

TEST_F(OverflowTest, ARefusedRequestLeavesARowOfStatusRefusedWithItsPrediction) {
  Backlogged();
  CallAccounting accounting = LedgerAccounting("refused");
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(1000), accounting);
  EXPECT_FALSE(call->Start());
  EXPECT_EQ(status, 429);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, ledger::AttemptStatus::kRefused);
  EXPECT_EQ(rows[0].admission, "refused");
  EXPECT_NEAR(rows[0].predicted_ttft_seconds, 1000.0 / 10 + 2.0 / 10, 1e-6);
  EXPECT_NEAR(rows[0].predicted_queue_seconds, 100, 1e-6);
  EXPECT_EQ(rows[0].cost.total(), 0);
  EXPECT_EQ(rows[0].prefill_worker.id, 0u);
  EXPECT_EQ(metrics->TtftPredictions().first, 0u);
}

TEST_F(OverflowTest, OverflowingAndWaitingForBurstAreRecordedAsSuch) {
  Backlogged();
  CallAccounting overflowed = LedgerAccounting("overflowed");
  auto call = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(1000), overflowed);
  ASSERT_TRUE(call->Start());
  Run();
  ExternalAnswers(2, 3);
  Run();
  ASSERT_EQ(status, 200);
  auto rows = CommittedRows(overflowed);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].admission, "overflowed");
  EXPECT_GT(rows[0].predicted_ttft_seconds, 100);

  workers->room = false;
  next_burst = std::chrono::system_clock::now();
  CallAccounting waited = LedgerAccounting("waited");
  auto burst = Make(router::OverflowRule::kOverflow, std::chrono::milliseconds(5000), waited);
  ASSERT_TRUE(burst->Start());
  Run();
  workers->room = true;
  EXPECT_EQ(queue->Pump(), 1);
  Run();
  workers->SendTokens(Ids(" x"), "stop");
  workers->Close();
  Run();
  rows = CommittedRows(waited);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].admission, "waited_for_burst");
}

TEST_F(OverflowTest, ARequestThatTimesOutInTheQueueLeavesARefusedRow) {
  workers->room = false;
  CallAccounting accounting = LedgerAccounting("timeout");
  auto call = Make(router::OverflowRule::kNever, std::chrono::milliseconds(0), accounting);
  ASSERT_TRUE(call->Start());
  Run();
  now += std::chrono::seconds(31);
  EXPECT_EQ(queue->Expire(), 1);
  Run();
  EXPECT_EQ(status, 503);
  const auto rows = CommittedRows(accounting);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].status, ledger::AttemptStatus::kRefused);
  EXPECT_EQ(rows[0].admission, "queue_timeout");
  EXPECT_EQ(rows[0].predicted_ttft_seconds, 0);  // no rate measured: nothing predicted
}

}  // namespace
}  // namespace pdserve::gateway
