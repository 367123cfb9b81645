// Tests for gateway/completion_call.h: the call driven through its interfaces, in process, with
// no sockets: fake self-hosted and external upstreams (tests/fakes/fake_attempt_upstream.h), the
// real admission queue on a test clock, a real ledger file. Covers a retry before the first
// token, a resume after it, a preemption sent back to the queue, overflow for each reason, the
// client leaving at each stage, and an attempt priced once.
#include "gateway/completion_call.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/fakes/fake_attempt_upstream.h"
#include "tests/gateway/gateway_test_support.h"

namespace pdserve::gateway {
namespace {

using testing::Ids;
using testing::TestTokenizer;

// The concatenated text of an SSE stream's chunks (choices[0].text or delta.content).
std::string StreamedText(const std::string& sse) {
  std::string text;
  size_t at = 0;
  while ((at = sse.find("data: {", at)) != std::string::npos) {
    const size_t end = sse.find("\n\n", at);
    auto chunk = nlohmann::json::parse(sse.substr(at + 6, end - at - 6));
    at = end;
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const auto& choice = chunk["choices"][0];
    if (choice.contains("text")) text += choice["text"].get<std::string>();
  }
  return text;
}

class CompletionCallTest : public ::testing::Test {
 protected:
  CompletionCallTest() {
    queue = std::make_shared<router::AdmissionQueue>([this] { return workers->prefill; },
                                                     [this] { return now; });
  }

  GenerationRequest Request(bool stream = false) const {
    GenerationRequest r;
    r.model = "m";
    r.prompt = "hello world";
    r.stream = stream;
    r.include_usage = true;
    r.ignore_eos = true;
    return r;
  }

  CallAdmission Admission() {
    CallAdmission a;
    a.queue = queue;
    a.deadline = now + std::chrono::seconds(30);
    return a;
  }

  std::shared_ptr<CompletionCall> Make(GenerationRequest request, int max_tokens = 8,
                                       std::optional<CallAdmission> admission = std::nullopt,
                                       CallAccounting accounting = {}) {
    CallOutput output;
    output.started = [this] { ++started; };
    output.write_stream = [this](std::string data) { streamed += data; };
    output.finish = [this](int s, std::string b, HttpHeaders h, bool e) {
      ++finished;
      status = s;
      body = std::move(b);
      headers = std::move(h);
      is_error = e;
    };
    return std::make_shared<CompletionCall>(
        io.get_executor(), CallWorkers{workers, workers}, TestTokenizer(), std::move(request),
        Ids("hello world"), max_tokens, "req-1", "m", std::move(output), metrics,
        admission ? std::move(*admission) : Admission(), std::move(accounting));
  }

  void Run() { testing::RunReady(io); }

  std::string Header(const std::string& name) const { return testing::HeaderValue(headers, name); }

  boost::asio::io_context io;
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  std::shared_ptr<FakeAttemptUpstream> workers = std::make_shared<FakeAttemptUpstream>();
  std::shared_ptr<GatewayMetrics> metrics = std::make_shared<GatewayMetrics>();
  std::shared_ptr<router::AdmissionQueue> queue;
  int started = 0, finished = 0, status = 0;
  bool is_error = false;
  std::string streamed, body;
  HttpHeaders headers;
};

TEST_F(CompletionCallTest, ServesAWholeResponseFromItsWorkers) {
  auto call = Make(Request());
  ASSERT_TRUE(call->Start());
  Run();
  ASSERT_EQ(workers->started.size(), 1u);
  EXPECT_EQ(*workers->last().spec.prompt, Ids("hello world"));
  EXPECT_EQ(started, 1);
  workers->SendTokens(Ids(" foo bar"), "length");
  workers->Close();
  Run();
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(status, 200);
  const auto json = nlohmann::json::parse(body);
  EXPECT_EQ(json["choices"][0]["text"], " foo bar");
  EXPECT_EQ(json["choices"][0]["finish_reason"], "length");
}

TEST_F(CompletionCallTest, RetriesBeforeTheFirstTokenAvoidingTheFailedWorker) {
  auto call = Make(Request());
  ASSERT_TRUE(call->Start());
  Run();
  const uint64_t first = workers->last_id();
  AttemptFault fault;
  fault.message = "decode worker lost";
  fault.retryable = true;
  fault.failed_worker = 7;
  workers->Fail(fault);
  Run();
  ASSERT_EQ(workers->started.size(), 2u);
  EXPECT_NE(workers->last_id(), first);
  EXPECT_EQ(workers->last().spec.exclude_workers, std::set<uint64_t>{7});
  EXPECT_EQ(*workers->last().spec.prompt, Ids("hello world"));  // nothing to resume
  workers->SendTokens(Ids(" ok"), "stop");
  workers->Close();
  Run();
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(nlohmann::json::parse(body)["choices"][0]["text"], " ok");
}

TEST_F(CompletionCallTest, GivesUpAfterThreeFailuresWith502) {
  auto call = Make(Request());
  ASSERT_TRUE(call->Start());
  Run();
  AttemptFault fault;
  fault.message = "boom";
  fault.retryable = true;
  for (int i = 1; i <= 3; ++i) {
    fault.failed_worker = i;
    workers->Fail(fault);
    Run();
  }
  EXPECT_EQ(workers->started.size(), 3u);
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(status, 502);
  EXPECT_TRUE(is_error);
  EXPECT_NE(body.find("worker_failed"), std::string::npos);
}

TEST_F(CompletionCallTest, ResumesAfterTheFirstTokenWithNoGapAndNoRepeat) {
  auto call = Make(Request(/*stream=*/true), 8);
  ASSERT_TRUE(call->Start());
  Run();
  const std::vector<int32_t> before = Ids(" one two");
  workers->SendTokens(before);
  Run();
  AttemptFault fault;
  fault.message = "decode worker lost";
  fault.retryable = true;
  fault.failed_worker = 3;
  workers->Fail(fault);
  Run();
  ASSERT_EQ(workers->started.size(), 2u);
  // The tokens so far are prompt now; the sampler's stream starts past them.
  std::vector<int32_t> resumed = Ids("hello world");
  resumed.insert(resumed.end(), before.begin(), before.end());
  EXPECT_EQ(*workers->last().spec.prompt, resumed);
  EXPECT_EQ(workers->last().spec.sampling.samples_drawn(), static_cast<int>(before.size()));
  EXPECT_EQ(workers->last().spec.sampling.max_tokens(), 8 - static_cast<int>(before.size()));
  workers->SendTokens(Ids(" three"), "stop");
  workers->Close();
  Run();
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(StreamedText(streamed + body), " one two three");
  EXPECT_EQ(started, 1);  // the client's response began once
}

TEST_F(CompletionCallTest, APreemptionGoesBackToTheQueueAheadOfNewWork) {
  auto call = Make(Request(/*stream=*/true), 8);
  ASSERT_TRUE(call->Start());
  Run();
  workers->SendTokens(Ids(" one"));
  Run();
  workers->room = false;  // no room anywhere now
  AttemptFault fault;
  fault.message = "preempted";
  fault.retryable = true;
  fault.preempted = true;
  fault.failed_worker = 5;
  workers->Fail(fault);
  Run();
  EXPECT_EQ(queue->waiting(), 1u);
  EXPECT_EQ(workers->started.size(), 1u);
  workers->room = true;
  EXPECT_EQ(queue->Pump(), 1);
  Run();
  ASSERT_EQ(workers->started.size(), 2u);
  // A preemption is not the worker's fault: it may resume there.
  EXPECT_TRUE(workers->last().spec.exclude_workers.empty());
  EXPECT_EQ(workers->last().spec.sampling.samples_drawn(), static_cast<int>(Ids(" one").size()));
  workers->SendTokens(Ids(" two"), "stop");
  workers->Close();
  Run();
  EXPECT_EQ(StreamedText(streamed + body), " one two");
}

TEST_F(CompletionCallTest, ARequestNoWorkerCouldHoldIsRefusedAtOnce) {
  workers->largest_kv_tokens = 4;
  auto call = Make(Request(), 8);
  EXPECT_FALSE(call->Start());
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(status, 400);
  EXPECT_NE(body.find("kv_capacity_exceeded"), std::string::npos);
  EXPECT_TRUE(workers->started.empty());
}

TEST_F(CompletionCallTest, TimesOutInTheQueueWith503) {
  workers->room = false;
  auto call = Make(Request());
  ASSERT_TRUE(call->Start());
  now += std::chrono::seconds(31);
  EXPECT_EQ(queue->Expire(), 1);
  Run();
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(status, 503);
  EXPECT_NE(body.find("queue_timeout"), std::string::npos);
  EXPECT_EQ(Header("retry-after"), "1");
}

TEST_F(CompletionCallTest, TheClientLeavingWhileQueuedWithdrawsItAndRefundsTheQuota) {
  workers->room = false;
  auto quota = std::make_shared<TenantQuota>(
      std::map<std::string, TenantLimits>{{"t", TenantLimits{0, 100}}});
  ASSERT_TRUE(quota->Admit("t", 60).admitted);
  CallAdmission admission = Admission();
  admission.quota = quota;
  admission.quota_tokens = 60;
  CallAccounting accounting;
  accounting.tenant = "t";
  auto call = Make(Request(), 8, admission, accounting);
  ASSERT_TRUE(call->Start());
  EXPECT_EQ(queue->waiting(), 1u);
  call->Cancel();
  Run();
  EXPECT_EQ(queue->waiting(), 0u);
  EXPECT_TRUE(workers->cancelled.empty());  // nothing ran to stop
  EXPECT_EQ(finished, 0);                   // the session is gone
  EXPECT_TRUE(quota->Admit("t", 60).admitted) << "the quota was not refunded";
}

TEST_F(CompletionCallTest, TheClientLeavingAfterTheStartCancelsTheAttempt) {
  auto call = Make(Request(/*stream=*/true));
  ASSERT_TRUE(call->Start());
  Run();
  call->Cancel();
  Run();
  EXPECT_EQ(workers->cancelled, std::vector<uint64_t>{workers->last_id()});
  workers->SendTokens(Ids(" late"));  // tokens after the cancel reach no one
  Run();
  EXPECT_EQ(StreamedText(streamed), "");
  EXPECT_EQ(finished, 0);
}

TEST_F(CompletionCallTest, TheClientLeavingMidStreamCancelsTheAttempt) {
  auto call = Make(Request(/*stream=*/true));
  ASSERT_TRUE(call->Start());
  Run();
  workers->SendTokens(Ids(" one"));
  Run();
  call->Cancel();
  Run();
  EXPECT_EQ(workers->cancelled.size(), 1u);
  AttemptFault fault;
  fault.message = "lost";
  fault.retryable = true;
  workers->Fail(fault);  // a failure after the cancel is not retried
  Run();
  EXPECT_EQ(workers->started.size(), 1u);
  EXPECT_EQ(finished, 0);
}

TEST_F(CompletionCallTest, AStopStringEndsTheTextAndCancelsTheWorkers) {
  GenerationRequest r = Request();
  r.stop = {" bar"};
  auto call = Make(r);
  ASSERT_TRUE(call->Start());
  Run();
  workers->SendTokens(Ids(" foo bar baz"));
  workers->Close();
  Run();
  EXPECT_EQ(workers->cancelled.size(), 1u);
  ASSERT_EQ(finished, 1);
  EXPECT_EQ(nlohmann::json::parse(body)["choices"][0]["text"], " foo");
}

}  // namespace
}  // namespace pdserve::gateway
