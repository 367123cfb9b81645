// End to end: the gateway's cost ledger under real traffic through a prefill/decode pair
// (docs/architecture.md, "Cost model"). Every attempt gets a row whose token counts are the usage
// the client saw; streamed requests cost more than nothing; cancelled and failed requests have
// rows; per worker, request costs plus retry and idle waste equal the capacity cost; a row survives
// kill -9 of the gateway right after its response.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::Curl;
using testing::Process;

class CostLedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty());
    ledger_ = dir_ / "ledger.sqlite";
    std::ofstream(dir_ / "keys") << "key:alpha-key team-a\nkey:beta-key team-b\n";
    std::ofstream(dir_ / "prices.json")
        << R"({"api-x": {"input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6,
                         "litellm_provider": "x"}})";
    StartGateway();
  }

  void StartGateway() {
    std::filesystem::remove(dir_ / "ready.json");
    gateway_ = testing::StartGateway(dir_.path(), model_,
                                     {"--ledger", ledger_, "--api-keys", dir_ / "keys"});
    ASSERT_TRUE(gateway_.process) << "gateway did not start";
  }

  std::unique_ptr<Process> StartWorker(const std::string& kind, const std::string& price,
                                       const std::string& capacity_class) {
    std::vector<std::string> args{kind,
                                  "--model",
                                  model_,
                                  "--threads",
                                  "1",
                                  "--kv-memory-mb",
                                  "32",
                                  "--price-per-gpu-hour",
                                  price,
                                  "--gpus",
                                  "2",
                                  "--capacity-class",
                                  capacity_class,
                                  "--gateway",
                                  "127.0.0.1:" + std::to_string(gateway_.control_port)};
    if (kind == "decode") args.insert(args.end(), {"--role", "decode"});
    return std::make_unique<Process>(args, dir_ / (kind + std::to_string(++workers_) + ".log"));
  }

  std::string CurlCommand(const std::string& key, const nlohmann::json& body, int timeout_s,
                          const std::string& extra_header) {
    std::string escaped;
    for (char c : body.dump()) escaped += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return "curl -sN --max-time " + std::to_string(timeout_s) + " -w '\\n%{http_code}' -D " +
           (dir_ / "headers") + " http://127.0.0.1:" + std::to_string(gateway_.http_port) +
           "/v1/completions -H 'Authorization: Bearer " + key +
           "' -H 'Content-Type: application/json' " + extra_header + " -d '" + escaped + "'";
  }

  // `on_tokens` runs once `tokens` stream chunks have arrived (testing::RunCurl).
  testing::HttpResult Post(const std::string& key, const nlohmann::json& body, int timeout_s = 60,
                           const std::string& extra_header = "", int tokens = 0,
                           const std::function<void()>& on_tokens = {}) {
    return testing::RunCurl(CurlCommand(key, body, timeout_s, extra_header), tokens, on_tokens);
  }

  std::string LastHeaders() const {
    std::ifstream in(dir_ / "headers");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  nlohmann::json Export() {
    return nlohmann::json::parse(
        testing::RunPdserve("ledger export --format json --ledger " + ledger_));
  }

  TempDir dir_;
  std::string model_, ledger_;
  testing::StartedGateway gateway_;
  int workers_ = 0;
};

nlohmann::json Body(const std::string& prompt, int max_tokens, bool stream) {
  nlohmann::json b = {{"model", "tiny"},
                      {"prompt", prompt},
                      {"max_tokens", max_tokens},
                      {"temperature", 0},
                      {"ignore_eos", true}};
  if (stream) {
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
  }
  return b;
}

TEST_F(CostLedgerTest, EveryAttemptIsARowAndCostsAddUpToCapacity) {
  auto prefill = StartWorker("prefill", "4.0", "reserved");
  auto decode = StartWorker("decode", "1.5", "burst");
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 2, std::chrono::seconds(60), "alpha-key"));

  // What each client saw: request id -> (prompt tokens, completion tokens, cost).
  struct Seen {
    int prompt = 0, completion = 0;
    double cost = -1;
    std::string tenant;
  };
  std::map<std::string, Seen> seen;
  for (int i = 0; i < 3; ++i) {
    auto r = Post("alpha-key", Body("plain " + std::to_string(i), 5 + i, false), 60,
                  "-H 'x-pdserve-tags: env=test,job=plain'");
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = nlohmann::json::parse(r.body);
    seen[j["id"]] = {j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"],
                     j["usage"]["cost_usd"], "team-a"};
    EXPECT_NE(LastHeaders().find("x-pdserve-cost-usd: "), std::string::npos) << LastHeaders();
  }
  for (int i = 0; i < 3; ++i) {
    auto r = Post("beta-key", Body("streamed " + std::to_string(i), 6, true));
    ASSERT_EQ(r.status, 200) << r.body;
    for (size_t pos = 0; (pos = r.body.find("data: {", pos)) != std::string::npos; ++pos) {
      auto chunk =
          nlohmann::json::parse(r.body.substr(pos + 6, r.body.find("\n\n", pos) - pos - 6));
      if (chunk.contains("usage") && !chunk["usage"].is_null()) {
        seen[chunk["id"]] = {chunk["usage"]["prompt_tokens"], chunk["usage"]["completion_tokens"],
                             chunk["usage"]["cost_usd"], "team-b"};
        EXPECT_GT(chunk["usage"]["cost_usd"].get<double>(), 0) << "a streamed request is free";
      }
    }
  }
  ASSERT_EQ(seen.size(), 6u);

  // A client that gives up: its request is cancelled on both workers and still has a row.
  Post("alpha-key", Body("give up", 3000, true), /*timeout_s=*/1);
  // A request whose decode worker dies mid-stream: it fails with an error row. The worker is
  // killed once a few tokens have streamed (a fixed 1.5 s raced the tiny model, which can
  // finish 3,000 tokens in that time on an idle machine).
  auto failed = Post("beta-key", Body("doomed", 3000, true), 30, "", /*tokens=*/3,
                     [&] { decode->Kill(SIGKILL); });
  EXPECT_NE(failed.body.find("\"error\""), std::string::npos) << failed.body.substr(0, 300);

  // Drain the survivors so their periods end with every step reported, then read the ledger.
  decode = StartWorker("decode", "1.5", "burst");
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 2, std::chrono::seconds(60), "alpha-key"));
  auto last = Post("alpha-key", Body("after", 4, false));
  ASSERT_EQ(last.status, 200) << last.body;
  {
    auto j = nlohmann::json::parse(last.body);
    seen[j["id"]] = {j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"],
                     j["usage"]["cost_usd"], "team-a"};
  }
  prefill->Signal(SIGTERM);
  decode->Signal(SIGTERM);
  EXPECT_EQ(prefill->Wait(std::chrono::seconds(20)), 0);
  EXPECT_EQ(decode->Wait(std::chrono::seconds(20)), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // their last periods written

  auto rows = Export();
  std::map<std::string, int> statuses;
  for (const auto& row : rows) {
    statuses[row["status"]]++;
    auto it = seen.find(row["request_id"]);
    if (it == seen.end()) continue;
    EXPECT_EQ(row["status"], "ok");
    EXPECT_EQ(row["prompt_tokens"], it->second.prompt) << row.dump();
    EXPECT_EQ(row["completion_tokens"], it->second.completion) << row.dump();
    EXPECT_NEAR(row["cost_usd"].get<double>(), it->second.cost, 1e-12 + 1e-9 * it->second.cost);
    EXPECT_GT(row["cost_usd"].get<double>(), 0);
    EXPECT_EQ(row["prefill_worker"]["role"], "prefill");
    EXPECT_EQ(row["decode_worker"]["capacity_class"], "burst");
    EXPECT_GT(row["kv_bytes"].get<int64_t>(), 0);
    EXPECT_EQ(row["tenant"], it->second.tenant);
    if (it->second.tenant == "team-a" && row["completion_tokens"] != 4) {
      EXPECT_EQ(row["tags"]["job"], "plain") << row.dump();
    }
  }
  EXPECT_EQ(statuses["ok"], 7);
  EXPECT_EQ(statuses["cancelled"], 1);
  EXPECT_GE(statuses["error"] + statuses["retried"], 1);

  // Conservation, per worker and overall, from the report over the same ledger.
  auto report = nlohmann::json::parse(testing::RunPdserve(
      "report --format json --ledger " + ledger_ + " --prices " + (dir_ / "prices.json")));
  ASSERT_TRUE(report.contains("workers")) << report.dump();
  EXPECT_EQ(report["workers"].size(), 3u);
  for (const auto& w : report["workers"]) {
    const double capacity = w["capacity_cost_usd"];
    const double parts = w["request_cost_usd"].get<double>() + w["retry_waste_usd"].get<double>() +
                         w["idle_waste_usd"].get<double>();
    EXPECT_GT(capacity, 0);
    EXPECT_NEAR(parts, capacity, 1e-9 * capacity) << w.dump();
  }
  const auto& overall = report["overall"];
  const double capacity = overall["capacity_cost_usd"];
  EXPECT_NEAR(overall["request_cost_usd"].get<double>() + overall["retry_waste_usd"].get<double>() +
                  overall["idle_waste_usd"].get<double>(),
              capacity, 1e-9 * capacity);
  EXPECT_GT(overall["retry_waste_usd"].get<double>(), 0);
  EXPECT_GT(overall["apis"]["api-x"]["api_cost_usd"].get<double>(), 0);
}

TEST_F(CostLedgerTest, RowSurvivesKillNineOfTheGatewayRightAfterTheResponse) {
  auto worker = testing::StartColocatedWorker(model_, gateway_.control_port, dir_ / "w.log");
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 1, std::chrono::seconds(60), "alpha-key"));
  auto r = Post("alpha-key", Body("durable", 4, false));
  ASSERT_EQ(r.status, 200) << r.body;
  gateway_.process->Kill(SIGKILL);
  const std::string id = nlohmann::json::parse(r.body)["id"];
  bool found = false;
  for (const auto& row : Export()) found = found || row["request_id"] == id;
  EXPECT_TRUE(found) << "the row of " << id << " is not in the ledger after kill -9";
  // And the gateway starts again on the same ledger.
  worker->Kill(SIGKILL);
  StartGateway();
  EXPECT_EQ(Curl(gateway_.http_port, "/health").status, 200);
}

TEST_F(CostLedgerTest, BadLedgerPathIsAClearErrorAtStart) {
  const std::string cmd = std::string("timeout 60 ") + PDSERVE_BINARY +
                          " gateway --port 0 --control-port 0 --model " + model_ +
                          " --ledger /nonexistent-dir/x.sqlite 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_NE(::pclose(p), 0);
  EXPECT_NE(out.find("ledger /nonexistent-dir/x.sqlite"), std::string::npos) << out;
}

}  // namespace
}  // namespace pdserve
