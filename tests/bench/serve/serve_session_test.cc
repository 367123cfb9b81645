// Whole sessions against the fake server: rate lists, the saturation sweep, the CLI end to end,
// and a throughput benchmark of the generator itself (printed, not asserted).
#include "bench/serve/serve_session.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/serve/fake_openai_server.h"
#include "bench/serve/report.h"

namespace pdserve::bench {
namespace {

ServeConfig SmallConfig(uint16_t port) {
  ServeConfig c;
  c.base_url = "http://127.0.0.1:" + std::to_string(port);
  c.model = "fake";
  c.num_prompts = 20;
  c.random_input_len = 16;
  c.random_output_len = 4;
  c.request_timeout_s = 10;
  return c;
}

TEST(ServeSession, SweepRunsEachRate) {
  auto server = FakeOpenAiServer::Start({});
  ASSERT_TRUE(server.ok());
  ServeConfig c = SmallConfig((*server)->port());
  c.sweep = "100,200,inf";
  auto session = RunServeSession(c, nullptr);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_EQ(session->runs.size(), 3u);
  EXPECT_TRUE(std::isinf(session->runs[2].request_rate));
  for (const ServeRun& run : session->runs) EXPECT_EQ(run.metrics.completed, 20);
  EXPECT_FALSE(SweepRates({.sweep = "1,x"}).ok());
  EXPECT_FALSE(SweepRates({.sweep = "0"}).ok());
}

// A server that needs 50 ms per request behind two connections serves at most 40 req/s: the
// saturation sweep doubles from 10 and stops at the first rate it cannot keep up with.
TEST(ServeSession, SaturationSweepStopsWhenTheServerFallsBehind) {
  FakeServerOptions slow;
  slow.ttft_s = 0.050;
  auto server = FakeOpenAiServer::Start(slow);
  ASSERT_TRUE(server.ok());
  ServeConfig c = SmallConfig((*server)->port());
  c.random_output_len = 1;
  c.max_concurrency = 2;
  c.sweep = "saturation";
  c.sweep_start_rate = 10;
  c.sweep_max_steps = 6;
  auto session = RunServeSession(c, nullptr);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  ASSERT_GE(session->runs.size(), 2u);
  const ServeRun& last = session->runs.back();
  EXPECT_LT(last.metrics.request_throughput, 0.9 * last.request_rate);
  EXPECT_LE(last.request_rate, 160);  // 40 req/s capacity is found by 80 or 160
  for (size_t i = 0; i + 1 < session->runs.size(); ++i) {
    EXPECT_GE(session->runs[i].metrics.request_throughput, 0.9 * session->runs[i].request_rate);
  }
}

TEST(ServeSession, RejectsBadConfigurations) {
  ServeConfig c = SmallConfig(1);
  c.model = "";
  EXPECT_FALSE(RunServeSession(c, nullptr).ok());
  c = SmallConfig(1);
  c.base_url = "ftp://127.0.0.1";
  EXPECT_EQ(RunServeSession(c, nullptr).status().code(), StatusCode::kInvalidArgument);
  c = SmallConfig(1);
  c.dataset_name = "sharegpt";
  EXPECT_FALSE(RunServeSession(c, nullptr).ok());  // no --dataset-path
  c = SmallConfig(1);
  c.goodput = {"ttft"};
  EXPECT_FALSE(RunServeSession(c, nullptr).ok());
}

// `--dataset multi-turn` goes to the chat endpoint in place of the completions default, runs
// conversations and reports the fake cache's share beside the ideal and TTFT by turn.
TEST(ServeSession, MultiTurnDatasetReportsTheCachedShare) {
  FakeServerOptions cached;
  cached.prefix_cache = true;
  auto server = FakeOpenAiServer::Start(cached);
  ASSERT_TRUE(server.ok());
  ServeConfig c = SmallConfig((*server)->port());
  c.dataset = "multi-turn";
  c.num_prompts = 12;  // 4 conversations of 3 turns
  c.turns = 3;
  c.system_prompt_len = 64;
  c.user_turn_len = 16;
  c.output_len = 8;
  c.max_concurrency = 1;
  auto session = RunServeSession(c, nullptr);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  EXPECT_EQ(session->config.endpoint, "/v1/chat/completions");
  EXPECT_EQ(session->config.dataset_name, "multi-turn");
  const ServeRun& run = session->runs[0];
  EXPECT_EQ(run.metrics.completed, 12);
  EXPECT_EQ(run.cache.reporting_requests, 12);
  EXPECT_TRUE(run.cache.multi_turn);
  EXPECT_EQ(run.cache.median_ttft_ms_by_turn.size(), 3u);
  EXPECT_DOUBLE_EQ(run.cache.share_of_ideal, 1.0);
  EXPECT_GT(run.cache.cached_share, 0.5);
  nlohmann::json j = SessionResultJson(*session);
  EXPECT_EQ(j["prefix_cache"]["cached_prompt_tokens"], run.cache.cached_tokens);
  EXPECT_EQ(j["turn_indices"].size(), 12u);
  EXPECT_NE(SummaryTable(*session, run).find("Median TTFT, turns 2+ (ms):"), std::string::npos);

  c.endpoint = "/v2/generate";  // chosen on purpose: not replaced
  EXPECT_EQ(RunServeSession(c, nullptr).status().code(), StatusCode::kInvalidArgument);
}

TEST(ServeSession, DatasetFilesAreToldApartAndATraceKeepsItsTimes) {
  auto server = FakeOpenAiServer::Start({});
  ASSERT_TRUE(server.ok());
  std::filesystem::create_directories(PDSERVE_TEST_TMP);
  std::string trace = std::string(PDSERVE_TEST_TMP) + "/session_trace.jsonl";
  std::ofstream(trace)
      << R"({"timestamp": 0, "input_length": 40, "output_length": 2, "hash_ids": [5]})"
      << "\n"
      << R"({"timestamp": 300, "input_length": 40, "output_length": 2, "hash_ids": [5]})"
      << "\n";
  ServeConfig c = SmallConfig((*server)->port());
  c.dataset = trace;
  auto resolved = ResolveDataset(c);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->dataset_name, "mooncake");
  EXPECT_EQ(resolved->dataset_path, trace);
  auto session = RunServeSession(c, nullptr);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  const ServeRun& run = session->runs[0];
  ASSERT_EQ(run.load.records.size(), 2u);
  EXPECT_GE(run.load.records[1].start_s, 0.295);  // at its timestamp, not at once
  EXPECT_EQ(run.cache.ideal_cached_tokens, 32);   // the second shares block 5: 39 -> 32
  EXPECT_FALSE(run.cache.reported());

  c.sweep = "1,2";
  EXPECT_FALSE(ResolveDataset(c).ok());  // a trace has its own times
  c = SmallConfig(1);
  c.dataset = "random";
  c.sharegpt_turns = "all";
  EXPECT_FALSE(ResolveDataset(c).ok());  // not a ShareGPT dataset
  c.dataset = std::string(PDSERVE_TEST_TMP) + "/no_such_dataset.json";
  EXPECT_EQ(ResolveDataset(c).status().code(), StatusCode::kNotFound);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ServeCommand, WritesJsonCsvHtmlAndAcceptanceReport) {
  auto server = FakeOpenAiServer::Start({});
  ASSERT_TRUE(server.ok());
  std::string dir = std::string(PDSERVE_TEST_TMP) + "/serve_command";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string url = "http://127.0.0.1:" + std::to_string((*server)->port());
  std::string serve = std::string(PDSERVE_BINARY) + " bench serve --base-url " + url +
                      " --model fake --num-prompts 30 --random-output-len 8 --sweep 100,inf" +
                      " --goodput ttft:1000 --metric-percentiles 50,99 --result-json " + dir +
                      "/r.json --result-csv " + dir + "/r.csv --result-html " + dir + "/r.html > " +
                      dir + "/out.txt 2>&1";
  ASSERT_EQ(std::system(serve.c_str()), 0) << Slurp(dir + "/out.txt");
  auto doc = nlohmann::json::parse(Slurp(dir + "/r.json"));
  ASSERT_EQ(doc["runs"].size(), 2u);
  EXPECT_EQ(doc["runs"][0]["completed"], 30);
  EXPECT_EQ(doc["runs"][1]["request_rate"], "inf");
  EXPECT_NE(Slurp(dir + "/r.html").find("<svg"), std::string::npos);
  EXPECT_NE(Slurp(dir + "/out.txt").find("Serving Benchmark Result"), std::string::npos);

  std::string acceptance =
      std::string(PDSERVE_BINARY) + " bench acceptance --base-url " + url +
      " --model fake --num-prompts 20 --sweep 50 --provider test --region "
      "local --output-dir " +
      dir + " --scaling-from " + dir + "/r.json " + dir +
      "/r.json --scaling-workers 2 --kv-transport tcp --kv-max-bytes 1048576 > " + dir +
      "/acc.txt 2>&1";
  ASSERT_EQ(std::system(acceptance.c_str()), 0) << Slurp(dir + "/acc.txt");
  std::string json_path;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("acceptance-", 0) == 0 && entry.path().extension() == ".json") {
      json_path = entry.path().string();
    }
  }
  ASSERT_FALSE(json_path.empty());
  auto acc = nlohmann::json::parse(Slurp(json_path));
  EXPECT_EQ(acc["provider"], "test");
  EXPECT_EQ(acc["kv_bandwidth"]["status"], "ok");  // ran `pdserve bench kv` on loopback
  EXPECT_FALSE(acc["kv_bandwidth"]["results"].empty());
  EXPECT_GT(acc["kv_bandwidth"]["results"][0]["gbps"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(acc["scaling"]["efficiency"].get<double>(), 0.5);  // same file: X_N = X_1
  EXPECT_EQ(acc["serve"]["runs"][0]["completed"], 20);
  std::string html_path = json_path.substr(0, json_path.size() - 5) + ".html";
  EXPECT_NE(Slurp(html_path).find("Scaling"), std::string::npos);

  // Errors are reported, with a non-zero exit, not crashes.
  std::string bad = std::string(PDSERVE_BINARY) + " bench serve --base-url ftp://x --model m > " +
                    dir + "/bad.txt 2>&1";
  EXPECT_NE(std::system(bad.c_str()), 0);
  EXPECT_NE(Slurp(dir + "/bad.txt").find("http://"), std::string::npos);
}

// Not a timed assertion: how many streamed requests per second the generator sustains against
// the fastest possible server on this machine, and its CPU time per request.
TEST(GeneratorThroughput, FastFakeServer) {
  auto server = FakeOpenAiServer::Start({});
  ASSERT_TRUE(server.ok());
  ServeConfig c = SmallConfig((*server)->port());
  c.num_prompts = 20000;
  c.random_input_len = 32;
  c.random_output_len = 16;
  c.max_concurrency = 64;
  auto session = RunServeSession(c, nullptr);
  ASSERT_TRUE(session.ok());
  const ServeRun& run = session->runs[0];
  EXPECT_EQ(run.metrics.completed, 20000);
  std::printf(
      "[ benchmark ] %lld streamed requests (16 chunks each) in %.2f s: %.0f req/s; generator "
      "CPU %.1f us/request; %lld connections\n",
      static_cast<long long>(run.metrics.completed), run.load.duration_s,
      run.metrics.request_throughput, run.load.generator_cpu_s * 1e6 / 20000,
      static_cast<long long>(run.load.connections_opened));
}

}  // namespace
}  // namespace pdserve::bench
