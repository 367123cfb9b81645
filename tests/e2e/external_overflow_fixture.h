// The fixture of the external-overflow end-to-end tests (external_overflow_test.cc: routing,
// pricing, failures, TLS and the SDK through the upstream; external_overflow_policy_test.cc:
// goodput under load, overflow=cheapest and waiting for a burst worker): a gateway whose
// upstream `fake` is the fake OpenAI server that `pdserve bench fake-server` runs (in this
// process, so that it counts the requests it gets), with simulated workers whose prompts take
// 0.5 s, and what a client saw of a response. Tests only.
#pragma once

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

namespace pdserve::overflow_test {

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
inline double SheetCost(int64_t prompt_tokens, int64_t completion_tokens) {
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

inline Seen ReadResponse(const HttpResponse& r, bool stream, bool chat) {
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

}  // namespace pdserve::overflow_test
