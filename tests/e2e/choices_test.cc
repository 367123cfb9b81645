// End to end: OpenAI's n on a prefill/decode pair, real processes on loopback. A request of 4
// choices runs on the decode worker that prefills its prompt once (placement "local", reason
// "choices"): greedy choices are alike and equal the one-choice answer, seeded ones differ, a
// stream interleaves the choices with each one's finishing chunk, the decode worker computes the
// prompt once (plus each other choice's last partial page), and the ledger's one row counts the
// prompt once and every choice's tokens. The official `openai` SDK's checks pass through the pair,
// its n choices included, and their ledger rows count their prompts once.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "tests/e2e/process.h"
#include "tests/e2e/sdk_check.h"
#include "tests/e2e/serving_metrics.h"

namespace pdserve {
namespace {

using testing::Process;

// More than two KV pages (16 tokens each) of the tiny model's vocabulary, the last one partial.
const std::string kPrompt =
    "The lighthouse keeper wrote one line a day in the log, and on the last day of the year he "
    "read them all aloud to the gulls";

class ChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty());
    ledger_ = dir_ / "ledger.sqlite";
    std::ofstream(dir_ / "keys") << "key:sk-good acme\n";  // the SDK's checks use keys
    auto gateway = testing::StartGateway(dir_.path(), model_,
                                         {"--ledger", ledger_, "--api-keys", dir_ / "keys"});
    ASSERT_TRUE(gateway.process) << "gateway did not start";
    gateway_ = std::move(gateway.process);
    http_ = gateway.http_port;
    control_ = gateway.control_port;
    prefill_ = StartWorker("prefill", "prefill.log", {});
    decode_ = StartWorker("decode", "decode.log", {"--role", "decode"});
    ASSERT_TRUE(testing::WaitForWorkerLoad(http_, 2, std::chrono::seconds(60), "sk-good"))
        << "the workers did not register";
  }

  std::unique_ptr<Process> StartWorker(const std::string& kind, const std::string& log,
                                       std::vector<std::string> extra) {
    std::vector<std::string> args{kind,
                                  "--model",
                                  model_,
                                  "--threads",
                                  "1",
                                  "--kv-memory-mb",
                                  "32",
                                  "--metrics-port",
                                  "0",
                                  "--gateway",
                                  "127.0.0.1:" + std::to_string(control_)};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(args, dir_ / log);
  }

  // POSTs `body` to /v1/completions with the test's key.
  testing::HttpResult Post(const nlohmann::json& body) {
    std::string escaped;
    for (char c : body.dump()) escaped += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return testing::RunCurl(
        "curl -sN --max-time 60 -w '\\n%{http_code}' http://127.0.0.1:" + std::to_string(http_) +
        "/v1/completions -H 'Authorization: Bearer sk-good' "
        "-H 'Content-Type: application/json' -d '" +
        escaped + "'");
  }

  double Metric(const std::string& log, const std::string& name) {
    return testing::WorkerMetric(dir_ / log, name);
  }

  nlohmann::json Complete(nlohmann::json body) {
    body["model"] = "tiny";
    body["prompt"] = kPrompt;
    body["ignore_eos"] = true;
    auto r = Post(body);
    EXPECT_EQ(r.status, 200) << r.body;
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();
  }

  model::testing::TempDir dir_;
  std::string model_, ledger_;
  std::unique_ptr<Process> gateway_, prefill_, decode_;
  int http_ = 0, control_ = 0;
};

TEST_F(ChoicesTest, FourChoicesShareOnePrefillAndTheLedgerCountsItOnce) {
  const nlohmann::json one = Complete({{"max_tokens", 8}, {"temperature", 0}});
  ASSERT_EQ(one["choices"].size(), 1u) << one.dump();
  const int prompt_tokens = one["usage"]["prompt_tokens"];
  ASSERT_GT(prompt_tokens, 32) << "the prompt should span more than two KV pages";
  ASSERT_NE(prompt_tokens % 16, 0) << "the prompt's last page should be partial";

  const double decode_before = Metric("decode.log", "pdserve_prompt_tokens_total");
  const double prefill_before = Metric("prefill.log", "pdserve_prompt_tokens_total");
  const nlohmann::json greedy = Complete({{"max_tokens", 8}, {"temperature", 0}, {"n", 4}});
  ASSERT_EQ(greedy["choices"].size(), 4u) << greedy.dump();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(greedy["choices"][i]["index"], i) << greedy.dump();
    EXPECT_EQ(greedy["choices"][i]["text"], one["choices"][0]["text"]) << "choice " << i;
    EXPECT_EQ(greedy["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(greedy["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(greedy["usage"]["completion_tokens"], 4 * 8);
  // The prompt ran once on the decode worker; each other choice computed its prompt's last
  // partial page (16-token pages) and its first token, whatever the cache held before.
  const double computed = Metric("decode.log", "pdserve_prompt_tokens_total") - decode_before;
  EXPECT_GE(computed, 3 * (prompt_tokens % 16 + 1));
  EXPECT_LE(computed, prompt_tokens + 3 * (prompt_tokens % 16 + 1));
  EXPECT_EQ(Metric("prefill.log", "pdserve_prompt_tokens_total"), prefill_before);

  // Seeded: each choice its own stream (seed + index), so they differ; the same request again
  // gives the same four.
  const nlohmann::json seeded = {{"max_tokens", 8}, {"temperature", 1}, {"seed", 5}, {"n", 4}};
  const nlohmann::json a = Complete(seeded), b = Complete(seeded);
  std::set<std::string> texts;
  for (int i = 0; i < 4; ++i) {
    texts.insert(a["choices"][i]["text"].get<std::string>());
    EXPECT_EQ(a["choices"][i]["text"], b["choices"][i]["text"]) << "choice " << i;
  }
  EXPECT_GT(texts.size(), 1u) << a.dump();

  // The ledger: one row for the request of four choices, the prompt counted once.
  testing::WaitForLedgerCommitted(http_);
  const auto rows =
      nlohmann::json::parse(testing::RunPdserve("ledger export --format json --ledger " + ledger_));
  int found = 0;
  for (const auto& row : rows) {
    if (row["request_id"] != greedy["id"]) continue;
    ++found;
    EXPECT_EQ(row["prompt_tokens"], prompt_tokens) << row.dump();
    EXPECT_EQ(row["completion_tokens"], 4 * 8) << row.dump();
    EXPECT_EQ(row["placement"], "local") << row.dump();
    EXPECT_EQ(row["placement_reason"], "choices") << row.dump();
  }
  EXPECT_EQ(found, 1);
  testing::ExpectPagesReturnToZero(dir_ / "decode.log");
}

TEST_F(ChoicesTest, AStreamInterleavesTheChoicesAndEndsEachOne) {
  const nlohmann::json body = {
      {"model", "tiny"},    {"prompt", kPrompt}, {"max_tokens", 6},
      {"temperature", 0.8}, {"seed", 11},        {"n", 3},
      {"ignore_eos", true}, {"stream", true},    {"stream_options", {{"include_usage", true}}}};
  auto r = Post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  std::map<int, std::string> text;
  std::map<int, int> finishes;
  std::vector<int> order;  // the choice of each chunk with text
  int usage_tokens = -1;
  std::istringstream lines(r.body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    auto chunk = nlohmann::json::parse(line.substr(6));
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      usage_tokens = chunk["usage"]["completion_tokens"];
    }
    for (const auto& c : chunk["choices"]) {
      const int i = c["index"];
      text[i] += c["text"].get<std::string>();
      if (!c["text"].get<std::string>().empty()) order.push_back(i);
      if (!c["finish_reason"].is_null()) ++finishes[i];
    }
  }
  EXPECT_EQ(text.size(), 3u) << r.body;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(finishes[i], 1) << "choice " << i << "\n" << r.body;
  EXPECT_EQ(usage_tokens, 3 * 6);
  // Interleaved: a later choice's text comes before an earlier choice's last.
  bool interleaved = false;
  for (size_t k = 1; k < order.size(); ++k) interleaved = interleaved || order[k] < order[k - 1];
  EXPECT_TRUE(interleaved) << r.body;
}

TEST_F(ChoicesTest, TheOpenAiSdksChoicesThroughAPairAreOneRowEach) {
  nlohmann::json report;
  testing::ExpectSdkChecksPass(http_, "tiny", "", {"n choices", "completions echo with logprobs"},
                               &report);
  nlohmann::json detail;
  for (const auto& r : report["results"]) {
    if (r["name"] == "n choices" && r["ok"].get<bool>()) detail = r["detail"];
  }
  ASSERT_TRUE(detail.is_object()) << report.dump();
  testing::WaitForLedgerCommitted(http_);
  const auto rows =
      nlohmann::json::parse(testing::RunPdserve("ledger export --format json --ledger " + ledger_));
  for (const char* key : {"greedy_id", "seeded_id"}) {
    int found = 0;
    for (const auto& row : rows) {
      if (row["request_id"] != detail[key]) continue;
      ++found;
      EXPECT_EQ(row["prompt_tokens"], detail["prompt_tokens"]) << row.dump();
      EXPECT_EQ(row["placement_reason"], "choices") << row.dump();
    }
    EXPECT_EQ(found, 1) << key << " " << detail[key];
  }
}

TEST_F(ChoicesTest, OutOfRangeIsAClearError) {
  auto r = Post({{"model", "tiny"}, {"prompt", "x"}, {"n", 200}});
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("'n' must be between 1 and 128"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace pdserve
