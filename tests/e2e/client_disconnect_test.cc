// End to end: a client that closes its connection while its non-streaming request runs gets the
// request cancelled on the worker (docs/architecture.md, "Failure rules"); keep-alive and pipelined
// non-streaming requests, which the gateway also watches, still get their answers.
#include <gtest/gtest.h>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::Curl;
using testing::HttpConnection;
using testing::HttpResponse;
using testing::Process;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;

class ClientDisconnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "pdserve make-model failed";
    gateway_ = testing::StartGateway(dir_.path(), model_);
    ASSERT_TRUE(gateway_.process) << "gateway did not start";
    http_ = gateway_.http_port;
    worker_ = testing::StartColocatedWorker(model_, gateway_.control_port, dir_ / "worker.log");
    // Registered, and its first load report says it runs nothing.
    ASSERT_TRUE(WaitFor([&] { return testing::SumOverWorkers(http_, "running") == 0; },
                        std::chrono::seconds(30)))
        << "the worker did not register";
  }

  TempDir dir_;
  std::string model_;
  testing::StartedGateway gateway_;
  std::unique_ptr<Process> worker_;
  int http_ = 0;
};

// Long enough that the tiny model is still generating many seconds later.
const std::string kLongRequest =
    R"({"model":"tiny","prompt":"go","max_tokens":4000,"ignore_eos":true,"temperature":0})";

TEST_F(ClientDisconnectTest, ClosingDuringANonStreamingRequestCancelsItOnTheWorker) {
  {
    HttpConnection client(http_);
    ASSERT_TRUE(client.connected());
    ASSERT_TRUE(client.Send(testing::HttpRequestText("POST", "/v1/completions", kLongRequest)));
    ASSERT_TRUE(WaitFor([&] { return testing::SumOverWorkers(http_, "running") == 1; },
                        std::chrono::seconds(20)))
        << "the request never ran on the worker";
    ASSERT_EQ(testing::MetricValue(http_, "pdserve_num_requests_running"), 1);
  }  // the client closes its socket without reading the answer

  const auto closed = Clock::now();
  EXPECT_TRUE(WaitFor([&] { return testing::SumOverWorkers(http_, "running") == 0; },
                      std::chrono::seconds(3)))
      << "the worker still runs the request of a client that left";
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_num_requests_running"), 0);
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_request_success_total{finished_reason=\"abort\"}"),
            1);
  std::printf("worker stopped %.2f s after the client closed\n",
              std::chrono::duration<double>(Clock::now() - closed).count());

  // The cancelled request's KV pages are back, and the next request is served token for token.
  testing::ExpectPagesReturnToZero(dir_ / "worker.log");
  testing::ExpectGreedyMatchesGenerate(http_, model_, "next");
  EXPECT_TRUE(WaitFor([&] { return testing::SumOverWorkers(http_, "running") == 0; },
                      std::chrono::seconds(3)));
  testing::ExpectPagesReturnToZero(dir_ / "worker.log");
}

TEST_F(ClientDisconnectTest, KeepAliveAndPipelinedNonStreamingRequestsAreAnswered) {
  HttpConnection client(http_);
  ASSERT_TRUE(client.connected());
  const std::string request = testing::HttpRequestText(
      "POST", "/v1/completions",
      R"({"model":"tiny","prompt":"again","max_tokens":6,"ignore_eos":true})");
  std::string error;
  HttpResponse response;
  // One after another on one connection: the watch for a close ends with each response.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.Send(request));
    ASSERT_TRUE(client.ReadResponse(&response, Clock::now() + std::chrono::seconds(30), &error))
        << error;
    EXPECT_EQ(response.status, 200) << response.body;
    EXPECT_EQ(nlohmann::json::parse(response.body)["usage"]["completion_tokens"], 6)
        << response.body;
    EXPECT_TRUE(response.keep_alive);
  }
  // Pipelined: the second request's bytes arrive while the first runs; both are answered in order.
  const std::string streamed = testing::HttpRequestText(
      "POST", "/v1/completions",
      R"({"model":"tiny","prompt":"s","max_tokens":3,"ignore_eos":true,"stream":true,)"
      R"("stream_options":{"include_usage":true}})");
  ASSERT_TRUE(client.Send(request + streamed + request));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.ReadResponse(&response, Clock::now() + std::chrono::seconds(30), &error))
        << i << ": " << error;
    EXPECT_EQ(response.status, 200) << response.body;
    if (i == 1) {
      int tokens = 0;
      bool done = false;
      testing::StreamedText(response.body, &tokens, &done);
      EXPECT_TRUE(done) << response.body;
      EXPECT_EQ(tokens, 3) << response.body;
      EXPECT_EQ(response.body.find("\"error\""), std::string::npos) << response.body;
    } else {
      EXPECT_EQ(nlohmann::json::parse(response.body)["usage"]["completion_tokens"], 6);
    }
  }
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_num_requests_running"), 0);
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_request_success_total{finished_reason=\"abort\"}"),
            -1);  // no request was cancelled
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_generation_tokens_total"), 3 * 6 + 3 + 2 * 6);
  testing::ExpectPagesReturnToZero(dir_ / "worker.log");
}

}  // namespace
}  // namespace pdserve
