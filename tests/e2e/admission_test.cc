// End to end: the admission queue (docs/architecture.md, "A request's life", step 2). Requests
// sent before any worker registered wait and complete; a request that waits past its deadline
// gets 503 with Retry-After; a client that leaves while its request waits takes it out of the
// queue; a decode pool with room for few streams serves many by queueing them instead of
// refusing; /ready says whether a route exists.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::Curl;
using testing::HttpConnection;
using testing::HttpResponse;
using testing::MetricValue;
using testing::Process;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

// One request on its own connection: its whole response (status 0 when none came in `timeout`).
HttpResponse Post(int port, const std::string& body, const std::vector<std::string>& headers = {},
                  std::chrono::seconds timeout = std::chrono::seconds(60)) {
  HttpConnection c(port);
  HttpResponse r;
  std::string error;
  if (!c.Send(testing::HttpRequestText("POST", "/v1/completions", body, headers))) return r;
  c.ReadResponse(&r, Clock::now() + timeout, &error);
  return r;
}

std::string Completion(int max_tokens, bool stream, const std::string& prompt = "hello") {
  nlohmann::json body = {{"model", "tiny"},  {"prompt", prompt},   {"max_tokens", max_tokens},
                         {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
  return body.dump();
}

class AdmissionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "pdserve make-model failed";
  }
  void StartGateway(std::vector<std::string> args = {}) {
    gateway_ = testing::StartGateway(dir_.path(), model_, std::move(args));
    ASSERT_TRUE(gateway_.process) << "gateway did not start";
    http_ = gateway_.http_port;
  }
  std::string Gateway() const { return "127.0.0.1:" + std::to_string(gateway_.control_port); }

  TempDir dir_;
  std::string model_;
  testing::StartedGateway gateway_;
  int http_ = 0;
};

TEST_F(AdmissionTest, RequestsSentBeforeAnyWorkerRegisteredWaitAndComplete) {
  StartGateway();
  EXPECT_EQ(Curl(http_, "/ready").status, 503);
  EXPECT_EQ(Curl(http_, "/health").status, 200);  // liveness is not readiness
  std::vector<std::future<HttpResponse>> sent;
  for (int i = 0; i < 4; ++i) {
    sent.push_back(std::async(std::launch::async, [this, i] {
      return Post(http_, Completion(8, /*stream=*/i % 2 == 1, "early " + std::to_string(i)));
    }));
  }
  ASSERT_TRUE(WaitFor([&] { return MetricValue(http_, "pdserve_num_requests_waiting") == 4; },
                      std::chrono::seconds(10)))
      << "the requests did not wait in the queue";
  Process worker(
      {"decode", "--role", "both", "--model", model_, "--threads", "1", "--gateway", Gateway()},
      dir_ / "worker.log");
  for (int i = 0; i < 4; ++i) {
    const HttpResponse r = sent[i].get();
    EXPECT_EQ(r.status, 200) << r.body;
    if (i % 2 == 1) {
      int tokens = 0;
      bool done = false;
      testing::StreamedText(r.body, &tokens, &done);
      EXPECT_TRUE(done) << r.body;
    } else {
      auto j = nlohmann::json::parse(r.body, nullptr, false);
      ASSERT_TRUE(j.is_object()) << r.body;
      EXPECT_EQ(j["usage"]["completion_tokens"], 8);
    }
  }
  EXPECT_EQ(Curl(http_, "/ready").status, 200);
  EXPECT_EQ(MetricValue(http_, "pdserve_num_requests_waiting"), 0);
  EXPECT_EQ(MetricValue(http_, "pdserve_request_queue_time_seconds_count"), 4);
  EXPECT_GT(MetricValue(http_, "pdserve_request_queue_time_seconds_sum"), 0);
}

TEST_F(AdmissionTest, ARequestThatWaitsPastItsDeadlineGets503WithRetryAfter) {
  StartGateway({"--queue-timeout", "20"});
  const auto start = Clock::now();
  // The header shortens the gateway's 20 s.
  const HttpResponse plain = Post(http_, Completion(4, false), {"x-pdserve-queue-timeout-ms: 300"});
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(plain.status, 503) << plain.body;
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  EXPECT_FALSE(plain.headers.count("retry-after") == 0) << "no Retry-After";
  auto j = nlohmann::json::parse(plain.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << plain.body;
  EXPECT_EQ(j["error"]["code"], "queue_timeout");
  // A streaming request that never started gets the same plain answer, not a broken stream.
  const HttpResponse streamed =
      Post(http_, Completion(4, true), {"x-pdserve-queue-timeout-ms: 200"});
  EXPECT_EQ(streamed.status, 503) << streamed.body;
  EXPECT_NE(streamed.headers.at("content-type").find("application/json"), std::string::npos);
  EXPECT_EQ(MetricValue(http_, "pdserve_request_rejected_total{reason=\"queue_timeout\"}"), 2);
  EXPECT_EQ(MetricValue(http_, "pdserve_num_requests_waiting"), 0);
}

TEST_F(AdmissionTest, BadAdmissionHeadersAreRefusedWithTheReason) {
  StartGateway();
  const HttpResponse priority = Post(http_, Completion(4, false), {"x-pdserve-priority: urgent"});
  EXPECT_EQ(priority.status, 400);
  EXPECT_NE(priority.body.find("x-pdserve-priority"), std::string::npos) << priority.body;
  const HttpResponse slo = Post(http_, Completion(4, false), {"x-pdserve-ttft-slo-ms: soon"});
  EXPECT_EQ(slo.status, 400);
  EXPECT_NE(slo.body.find("x-pdserve-ttft-slo-ms"), std::string::npos) << slo.body;
}

TEST_F(AdmissionTest, AClientThatLeavesWhileItsRequestWaitsTakesItOutOfTheQueue) {
  StartGateway();
  for (bool stream : {false, true}) {
    HttpConnection client(http_);
    ASSERT_TRUE(
        client.Send(testing::HttpRequestText("POST", "/v1/completions", Completion(4000, stream))));
    ASSERT_TRUE(WaitFor([&] { return MetricValue(http_, "pdserve_num_requests_waiting") == 1; },
                        std::chrono::seconds(10)));
    client.Close();
    EXPECT_TRUE(WaitFor([&] { return MetricValue(http_, "pdserve_num_requests_waiting") == 0; },
                        std::chrono::seconds(5)))
        << (stream ? "streaming" : "plain") << " request still queued after its client left";
  }
  // A worker that joins now finds nothing to run.
  Process worker(
      {"decode", "--role", "both", "--model", model_, "--threads", "1", "--gateway", Gateway()},
      dir_ / "worker.log");
  ASSERT_TRUE(
      WaitFor([&] { return Curl(http_, "/ready").status == 200; }, std::chrono::seconds(30)));
  // Its first load report came, and it still runs nothing: the queue it joined was empty.
  ASSERT_TRUE(testing::WaitForWorkerLoad(http_, 1, std::chrono::seconds(30)));
  EXPECT_EQ(testing::SumOverWorkers(http_, "running"), 0);
  EXPECT_EQ(MetricValue(http_, "pdserve_num_requests_running"), 0);
}

TEST_F(AdmissionTest, ADecodePoolWithRoomForFewStreamsServesManyByQueueing) {
  StartGateway();
  // A KV pool of 64 pages of 16 tokens reserved up front (no lookahead): room for two requests
  // of 400 tokens (25 pages each) at a time, where eight are sent together.
  Process prefill({"prefill", "--model", model_, "--threads", "1", "--gateway", Gateway()},
                  dir_ / "prefill.log");
  Process decode(
      {"decode", "--role", "decode", "--model", model_, "--threads", "1", "--kv-pages", "64",
       "--kv-lookahead-tokens", "0", "--metrics-port", "0", "--gateway", Gateway()},
      dir_ / "decode.log");
  ASSERT_TRUE(
      WaitFor([&] { return Curl(http_, "/ready").status == 200; }, std::chrono::seconds(30)))
      << testing::ReadLog(dir_ / "decode.log");
  std::vector<std::future<HttpResponse>> sent;
  for (int i = 0; i < 8; ++i) {
    sent.push_back(std::async(std::launch::async, [this, i] {
      return Post(http_, Completion(390, i % 2 == 1, "many " + std::to_string(i)));
    }));
  }
  for (auto& f : sent) {
    const HttpResponse r = f.get();
    EXPECT_EQ(r.status, 200) << r.body.substr(0, 400);
  }
  EXPECT_EQ(MetricValue(http_, "pdserve_request_failure_total"), 0);
  // Two at a time: the others waited in the gateway's queue for room, up to three rounds of 390
  // tokens, for about 0.6 of the requests' time together (0, 0, 1, 1, 2, 2, 3 and 3 rounds of
  // waiting against 8 of running), however long a round takes on this machine: a share, not a
  // fixed time, which the tiny model can run every round within.
  const double waited = MetricValue(http_, "pdserve_request_queue_time_seconds_sum");
  const double total = MetricValue(http_, "pdserve_e2e_request_latency_seconds_sum");
  EXPECT_GT(waited, 0.3 * total) << "waited " << waited << " s of " << total << " s";
  // A request no decode worker could ever hold is refused at once, not queued till its deadline.
  const HttpResponse huge = Post(http_, Completion(2000, false));
  EXPECT_EQ(huge.status, 400) << huge.body;
  EXPECT_NE(huge.body.find("kv_capacity_exceeded"), std::string::npos) << huge.body;
  testing::ExpectPagesReturnToZero(dir_ / "decode.log");
}

}  // namespace
}  // namespace pdserve
