// The load generator against the in-process fake server: measured TTFT and TPOT against injected
// delays, failures with their reasons, and the arrival schedule as actually sent.
#include "bench/serve/load_generator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>

#include "bench/serve/fake_openai_server.h"
#include "bench/serve/metrics.h"

namespace pdserve::bench {
namespace {

std::vector<PreparedRequest> MakeRequests(int n, int64_t output_len, std::string endpoint,
                                          std::string extra_body = "") {
  RandomDatasetOptions data;
  data.num_prompts = n;
  data.input_len = 32;
  data.output_len = output_len;
  auto prompts = SampleRandomPrompts(data);
  EXPECT_TRUE(prompts.ok());
  RequestBodyOptions body;
  body.endpoint = std::move(endpoint);
  body.model = "fake";
  body.ignore_eos = true;
  body.extra_body_json = std::move(extra_body);
  auto requests = BuildRequests(*prompts, body);
  EXPECT_TRUE(requests.ok()) << requests.status().ToString();
  return std::move(requests).value();
}

HttpTarget Loopback(uint16_t port) { return {"127.0.0.1", std::to_string(port), ""}; }

// The fake server sleeps the injected times, so a correct client can never measure less; how
// much more depends on how loaded the machine is, so the upper bounds leave room for a busy CI.
TEST(LoadGenerator, MeasuresInjectedTtftAndTpot) {
  FakeServerOptions server_options;
  server_options.ttft_s = 0.100;
  server_options.itl_s = 0.020;
  auto server = FakeOpenAiServer::Start(server_options);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  LoadOptions options;
  options.max_concurrency = 16;
  options.client.request_timeout_s = 30;
  auto requests = MakeRequests(48, 16, "/v1/completions");
  auto run = RunLoad(Loopback((*server)->port()), options, requests);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto metrics = CalculateMetrics(run->records, run->duration_s, {50, 99}, {});
  ASSERT_EQ(metrics.completed, 48) << run->records[0].error;
  EXPECT_GE(metrics.ttft.median_ms, 99.0);
  EXPECT_LE(metrics.ttft.median_ms, 125.0);
  EXPECT_GE(metrics.tpot.median_ms, 19.5);
  EXPECT_LE(metrics.tpot.median_ms, 25.0);
  EXPECT_GE(metrics.itl.median_ms, 19.5);
  EXPECT_LE(metrics.itl.median_ms, 25.0);
  EXPECT_EQ(metrics.total_output, 48 * 16);
  EXPECT_EQ(run->records[0].output_token_source, TokenCountSource::kServerUsage);
  EXPECT_EQ(run->records[0].prompt_tokens, 32);  // the fake server counts words
  EXPECT_LE(run->max_concurrent_requests, 16);
  EXPECT_LE(run->connections_opened, 16);  // keep-alive connections are reused
}

TEST(LoadGenerator, ChatEndpointAndCountingChunksWithoutUsage) {
  auto server = FakeOpenAiServer::Start({});
  ASSERT_TRUE(server.ok());
  LoadOptions options;
  options.endpoint = "/v1/chat/completions";
  auto requests =
      MakeRequests(20, 7, options.endpoint, R"({"stream_options":{"include_usage":false}})");
  auto run = RunLoad(Loopback((*server)->port()), options, requests);
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 7);
    EXPECT_EQ(r.output_token_source, TokenCountSource::kChunks);
    EXPECT_EQ(r.generated_text.size(), 7 * std::string(" hello").size());
  }
  // A tokenizer-like counter replaces chunk counts when the server sends no usage.
  options.output_counter = [](std::string_view text) { return int64_t(text.size()); };
  run = RunLoad(Loopback((*server)->port()), options, requests);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->records[3].output_tokens, 42);
  EXPECT_EQ(run->records[3].output_token_source, TokenCountSource::kTokenizer);
}

TEST(LoadGenerator, CountsErrorsHangsAndMidStreamClosesAsFailuresAndEnds) {
  FakeServerOptions server_options;
  server_options.faults = {FakeFault::kNone,           FakeFault::kHttp500, FakeFault::kHang,
                           FakeFault::kCloseMidStream, FakeFault::kBadJson, FakeFault::kHttp429};
  auto server = FakeOpenAiServer::Start(server_options);
  ASSERT_TRUE(server.ok());
  LoadOptions options;
  options.max_concurrency = 1;  // one at a time, so request i meets fault i % 6
  options.client.request_timeout_s = 0.5;
  auto requests = MakeRequests(12, 8, "/v1/completions");
  auto begin = std::chrono::steady_clock::now();
  auto run = RunLoad(Loopback((*server)->port()), options, requests);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_TRUE(run.ok());
  EXPECT_LT(took, 5.0);
  auto metrics = CalculateMetrics(run->records, run->duration_s, {99}, {});
  EXPECT_EQ(metrics.completed, 2);
  std::map<std::string, int64_t> expected = {
      {"http_status", 4}, {"timeout", 2}, {"closed_mid_stream", 2}, {"bad_response", 2}};
  EXPECT_EQ(metrics.failures_by_reason, expected);
  EXPECT_EQ(run->records[1].http_status, 500);
  EXPECT_EQ(run->records[1].retry_after_s, -1);
  EXPECT_EQ(run->records[5].http_status, 429);
  EXPECT_EQ(run->records[5].retry_after_s, 7);  // the server's back-pressure is kept
  EXPECT_NE(run->records[1].error.find("injected failure"), std::string::npos);
  EXPECT_NE(run->records[3].error.find("closed"), std::string::npos);
  EXPECT_NE(run->records[4].error.find("not JSON"), std::string::npos);
}

TEST(LoadGenerator, RefusedConnectionsAreFailuresWithReason) {
  uint16_t port = 0;
  {
    auto server = FakeOpenAiServer::Start({});
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
  }  // closed: nothing listens on the port now
  auto run = RunLoad(Loopback(port), {}, MakeRequests(5, 4, "/v1/completions"));
  ASSERT_TRUE(run.ok());
  for (const RequestRecord& r : run->records) {
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.failure, FailureKind::kConnect);
    EXPECT_NE(r.error.find("connect to 127.0.0.1"), std::string::npos) << r.error;
  }
}

// Sends follow the gamma schedule: the gaps between actual send times have the set mean and
// coefficient of variation, within bounds from the sample size (see arrivals_test.cc).
TEST(LoadGenerator, SendTimesFollowTheArrivalSchedule) {
  auto server = FakeOpenAiServer::Start({});
  ASSERT_TRUE(server.ok());
  LoadOptions options;
  options.request_rate = 400;
  options.burstiness = 1.0;
  options.seed = 7;
  const int n = 800;
  auto run = RunLoad(Loopback((*server)->port()), options, MakeRequests(n, 2, "/v1/completions"));
  ASSERT_TRUE(run.ok());
  std::vector<double> starts;
  for (const auto& r : run->records) starts.push_back(r.start_s);
  double sum = 0, sq = 0;
  for (int i = 1; i < n; ++i) sum += starts[i] - starts[i - 1];
  double mean = sum / (n - 1);
  for (int i = 1; i < n; ++i) sq += std::pow(starts[i] - starts[i - 1] - mean, 2);
  double cv = std::sqrt(sq / (n - 1)) / mean;
  // Mean gap 2.5 ms, standard error 2.5 ms / sqrt(n) = 0.09 ms; allow 5 sigma plus 0.1 ms of
  // timer lateness. CV 1 with standard error sqrt(2 / n) = 0.05; allow 5 sigma.
  EXPECT_NEAR(mean, 1.0 / 400, 5 * 0.0025 / std::sqrt(n) + 1e-4);
  EXPECT_NEAR(cv, 1.0, 5 * std::sqrt(2.0 / n));
}

}  // namespace
}  // namespace pdserve::bench
