// End to end: a gateway and colocated workers as real processes on loopback, driven over HTTP.
#include <gtest/gtest.h>

#include <fstream>

#include <filesystem>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using testing::Curl;
using testing::Process;

class ColocatedServingTest : public testing::GatewayFixture {
 protected:
  // A colocated worker logging to `log` in the test's folder.
  std::unique_ptr<Process> StartWorker(const std::string& log = "worker.log") {
    return testing::StartColocatedWorker(model_, control_, dir_ / log);
  }

  void WaitForWorkers(size_t n) {
    for (int i = 0; i < 300; ++i) {
      auto h = Curl(http_, "/health");
      if (h.status == 200 && nlohmann::json::parse(h.body)["workers"].get<size_t>() == n) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "workers did not register";
  }
};

TEST_F(ColocatedServingTest, GreedyTextMatchesOneEngineStreamedAndNot) {
  auto worker = StartWorker();
  WaitForWorkers(1);
  for (int i = 0; i < 20; ++i) {
    const std::string prompt =
        "Prompt number " + std::to_string(i) + (i % 3 ? " about cats" : " ... and dogs");
    testing::ExpectGreedyMatchesGenerate(http_, model_, prompt);
  }
}

TEST_F(ColocatedServingTest, ErrorsAreOpenAiErrorObjects) {
  auto none = Curl(http_, "/v1/completions", R"({"model":"tiny","prompt":"x"})");
  EXPECT_EQ(none.status, 503) << none.body;  // no worker yet
  auto worker = StartWorker();
  WaitForWorkers(1);
  auto unknown = Curl(http_, "/v1/completions", R"({"model":"gpt-9","prompt":"x"})");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_EQ(nlohmann::json::parse(unknown.body)["error"]["code"], "model_not_found");
  auto bad = Curl(http_, "/v1/chat/completions", R"({"model":"tiny","messages":"hi"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(nlohmann::json::parse(bad.body)["error"]["param"], "messages");
  auto garbage = Curl(http_, "/v1/chat/completions", "{{{");
  EXPECT_EQ(garbage.status, 400);
  std::string long_prompt(20000, 'a');
  auto too_long = Curl(http_, "/v1/completions",
                       nlohmann::json{{"model", "tiny"}, {"prompt", long_prompt}}.dump());
  EXPECT_EQ(too_long.status, 413) << too_long.body;
  {  // a body past the gateway's 8 MiB limit, still streaming in as the 413 goes out
    const auto big = dir_ / "big.json";
    std::ofstream(big) << std::string(32 << 20, ' ');
    for (int i = 0; i < 5; ++i) {
      auto huge = testing::RunCurl(
          "curl -s --max-time 30 -w '\\n%{http_code}' -H "
          "'Content-Type: application/json' --data-binary @" +
          big + " http://127.0.0.1:" + std::to_string(http_) + "/v1/completions");
      EXPECT_EQ(huge.status, 413) << huge.body;
    }
  }
  auto path = Curl(http_, "/v2/nothing");
  EXPECT_EQ(path.status, 404);
  // A body that is not declared JSON (curl -d's form encoding, text) is refused as such; a
  // JSON type with parameters, or none at all, is JSON.
  const std::string hi = R"({"model":"tiny","prompt":"hi","max_tokens":2,"ignore_eos":true})";
  for (const std::string type : {"application/x-www-form-urlencoded", "text/plain"}) {
    auto wrong = testing::RunCurl(
        "curl -s --max-time 30 -w '\\n%{http_code}' -H 'Content-Type: " + type + "' -d '" + hi +
        "' http://127.0.0.1:" + std::to_string(http_) + "/v1/completions");
    EXPECT_EQ(wrong.status, 415) << type << ": " << wrong.body;
    EXPECT_NE(wrong.body.find("must be application/json, got '" + type + "'"), std::string::npos)
        << wrong.body;
  }
  for (const std::string header :
       {"-H 'Content-Type: application/json; charset=utf-8'", "-H 'Content-Type:'"}) {
    auto fine =
        testing::RunCurl("curl -s --max-time 30 -w '\\n%{http_code}' " + header + " -d '" + hi +
                         "' http://127.0.0.1:" + std::to_string(http_) + "/v1/completions");
    ASSERT_EQ(fine.status, 200) << header << ": " << fine.body;
    EXPECT_EQ(nlohmann::json::parse(fine.body)["usage"]["completion_tokens"], 2) << fine.body;
  }
  auto ok = Curl(
      http_, "/v1/chat/completions",
      R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"ignore_eos":true})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  const auto answer = nlohmann::json::parse(ok.body);
  EXPECT_EQ(answer["choices"][0]["message"]["role"], "assistant") << ok.body;
  EXPECT_TRUE(answer["choices"][0]["message"]["content"].is_string()) << ok.body;
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "length") << ok.body;
  EXPECT_EQ(answer["usage"]["completion_tokens"], 3) << ok.body;
}

// Bytes a client may send that JSON cannot carry back, or that nest deeper than anything walks
// safely: each gets its 4xx error object (whose JSON must be writable), and the gateway serves on.
TEST_F(ColocatedServingTest, BytesThatAreNotUtf8NotHttpOrNestTooDeeplyGetErrorsNotACrash) {
  auto worker = StartWorker();
  WaitForWorkers(1);
  auto ask = [&](const std::string& request) {
    testing::HttpConnection c(http_);
    EXPECT_TRUE(c.Send(request));
    testing::HttpResponse r;
    std::string error;
    EXPECT_TRUE(
        c.ReadResponse(&r, std::chrono::steady_clock::now() + std::chrono::seconds(20), &error))
        << error;
    return r;
  };
  const std::string ok_body = R"({"model":"tiny","prompt":"x","max_tokens":1,"ignore_eos":true})";
  auto path = ask("GET /\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(path.status, 404);
  EXPECT_NE(
      nlohmann::json::parse(path.body)["error"]["message"].get<std::string>().find("\xEF\xBF\xBD"),
      std::string::npos)
      << path.body;  // the bad bytes, replaced
  auto tag_key = ask(
      testing::HttpRequestText("POST", "/v1/completions", ok_body, {"x-pdserve-tags: \xff=\xfe"}));
  EXPECT_EQ(tag_key.status, 400) << tag_key.body;
  auto tag_value = ask(
      testing::HttpRequestText("POST", "/v1/completions", ok_body, {"x-pdserve-tags: team=\xff"}));
  EXPECT_EQ(tag_value.status, 400) << tag_value.body;
  EXPECT_NE(tag_value.body.find("not UTF-8"), std::string::npos) << tag_value.body;
  auto part = ask(testing::HttpRequestText(
      "POST", "/v1/chat/completions",
      R"({"model":"tiny","messages":[{"role":"user","content":[{"type":5,"text":"x"}]}]})"));
  EXPECT_EQ(part.status, 400) << part.body;
  const int depth = 100000;
  auto deep = ask(testing::HttpRequestText("POST", "/v1/completions",
                                           R"({"model":"tiny","prompt":"x","max_tokens":)" +
                                               std::string(depth, '[') + "1" +
                                               std::string(depth, ']') + "}"));
  EXPECT_EQ(deep.status, 400) << deep.body.substr(0, 200);
  // Bytes that are not HTTP at all: a 400 that says so, not a silently closed connection.
  for (const std::string& garbage :
       {std::string("HELLO THERE\r\n\r\n"), std::string("GET / HTTP/1.1\r\nBad Header\r\n\r\n"),
        std::string("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                    "\r\nzz\r\n")}) {
    auto bad = ask(garbage);
    EXPECT_EQ(bad.status, 400) << garbage;
    EXPECT_NE(bad.body.find("Malformed HTTP request"), std::string::npos) << bad.body;
  }
  // Header fields past 64 KiB: 431, which says what is too large.
  auto long_headers = ask(testing::HttpRequestText("POST", "/v1/completions", ok_body,
                                                   {"x-long: " + std::string(70 * 1024, 'a')}));
  EXPECT_EQ(long_headers.status, 431) << long_headers.body;
  EXPECT_NE(long_headers.body.find("header fields exceed"), std::string::npos) << long_headers.body;
  auto still = Curl(http_, "/v1/completions", ok_body);
  ASSERT_EQ(still.status, 200) << still.body;
  EXPECT_EQ(nlohmann::json::parse(still.body)["usage"]["completion_tokens"], 1) << still.body;
  testing::ExpectGreedyMatchesGenerate(http_, model_, "still serving");
}

// A long greedy stream on worker a; kill -9 it once the stream has started (a few tokens in, not
// after a fixed delay, which the tiny model can outrun) and start worker b. The stream waits in the
// queue for b, resumes there from its last token, and ends as `pdserve generate` would, with no
// error event.
TEST_F(ColocatedServingTest, KilledWorkerMidStreamResumesOnTheNextWorker) {
  auto a = StartWorker("a.log");
  WaitForWorkers(1);
  std::unique_ptr<testing::Process> b;
  auto streamed = Curl(http_, "/v1/completions", testing::GreedyStreamBody("tiny", "go", 3000), 60,
                       /*chunks=*/3, [&] {
                         a->Kill(SIGKILL);
                         b = StartWorker("b.log");
                       });
  testing::ExpectStreamMatchesGenerate(streamed.body, 3000, "--model " + model_ + " --prompt go");
  EXPECT_GE(testing::MetricValue(http_, "pdserve_requests_resumed_total{reason=\"worker_failed\"}"),
            1);
  ASSERT_TRUE(b);
  testing::ExpectGreedyMatchesGenerate(http_, model_, "again");
  testing::ExpectPagesReturnToZero(dir_ / "b.log");
}

// SIGTERM while a request runs on the worker (three of its tokens reached the client, and the
// worker's drain says it was running one): the request still gets every token, the worker exits
// 0 once it is done, and its KV pages are all back by then.
TEST_F(ColocatedServingTest, SigtermDrainsAWorkerWithoutFailingItsRequests) {
  auto a = StartWorker();
  WaitForWorkers(1);
  constexpr int kTokens = 500;  // long enough to be running when the signal lands
  bool signalled = false;
  auto r = Curl(http_, "/v1/completions",
                nlohmann::json{{"model", "tiny"},
                               {"prompt", "x"},
                               {"max_tokens", kTokens},
                               {"ignore_eos", true},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}}}
                    .dump(),
                60, /*chunks=*/3, [&] {
                  a->Signal(SIGTERM);
                  signalled = true;
                });
  ASSERT_TRUE(signalled) << "the stream never reached its third token: " << r.body.substr(0, 300);
  EXPECT_EQ(r.status, 200);
  int completion_tokens = 0;
  bool done = false;
  testing::StreamedText(r.body, &completion_tokens, &done);
  EXPECT_EQ(completion_tokens, kTokens)
      << r.body.substr(r.body.size() > 300 ? r.body.size() - 300 : 0);
  EXPECT_TRUE(done);
  EXPECT_EQ(r.body.find("\"error\""), std::string::npos) << r.body.substr(0, 300);
  EXPECT_EQ(a->Wait(std::chrono::seconds(20)), 0);
  const std::string log = testing::ReadLog(dir_ / "worker.log");
  EXPECT_NE(log.find("draining: finishing 1 running"), std::string::npos)
      << "the drain did not find the request running:\n"
      << log;
  EXPECT_NE(log.find("drained: 0 KV pages in use"), std::string::npos) << log;
}

}  // namespace
}  // namespace pdserve

namespace pdserve {
namespace {

TEST_F(ColocatedServingTest, MetricsUseVllmNamesAndCountWhatWasServed) {
  auto worker = StartWorker();
  WaitForWorkers(1);
  for (int i = 0; i < 3; ++i) {
    auto r = Curl(http_, "/v1/completions",
                  R"({"model":"tiny","prompt":"count me","max_tokens":5,"ignore_eos":true})");
    ASSERT_EQ(r.status, 200);
  }
  auto m = Curl(http_, "/metrics");
  ASSERT_EQ(m.status, 200);
  for (const char* name :
       {"pdserve_time_to_first_token_seconds_bucket", "pdserve_inter_token_latency_seconds_count",
        "pdserve_e2e_request_latency_seconds_count 3", "pdserve_generation_tokens_total 15",
        "pdserve_request_success_total{finished_reason=\"length\"} 3",
        "pdserve_num_requests_running 0", "pdserve_workers{class=\"reserved\",pool=\"both\"} 1"}) {
    EXPECT_NE(m.body.find(name), std::string::npos) << name << "\n" << m.body.substr(0, 2000);
  }
}

}  // namespace
}  // namespace pdserve
