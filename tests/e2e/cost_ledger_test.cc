// End to end: the gateway's cost ledger under real traffic through a prefill/decode pair
// (docs/architecture.md, "Cost model"). Every attempt gets a row whose token counts are the usage
// the client saw; streamed requests cost more than nothing; cancelled and failed requests have
// rows; a row survives kill -9 of the gateway right after its response. Costs are checked against
// figures the ledger did not make: each row's cost from its step seconds and the prices and GPU
// counts the test gave its workers; each worker's busy seconds against the sum of its rows' step
// seconds and against its own pdserve_busy_seconds_total; its uptime against the process
// lifetime the test measured; and request costs plus retry and idle waste against capacity.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "tests/e2e/process.h"
#include "tests/e2e/serving_metrics.h"
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

  // A worker process, and what the test knows of it independently of the gateway.
  struct StartedWorker {
    std::unique_ptr<Process> process;
    std::string log;
    pid_t pid = -1;
    double price = 0;         // as given on its command line
    double spawned_unix = 0;  // just before it was started
    double gone_unix = 0;     // just after it exited (0: still running)
    // When the test saw it registered (after it did), and when it was told to stop or killed.
    double registered_unix = 0, stopped_unix = 0;
    double own_busy = -1;  // its pdserve_busy_seconds_total, read when it had no more work
    bool killed = false;   // read before a kill -9: its last steps may come after
  };

  StartedWorker StartWorker(const std::string& kind, double price,
                            const std::string& capacity_class) {
    StartedWorker w;
    w.log = dir_ / (kind + std::to_string(++workers_) + ".log");
    w.price = price;
    w.spawned_unix = NowUnix();
    std::vector<std::string> args{kind,
                                  "--model",
                                  model_,
                                  "--threads",
                                  "1",
                                  "--kv-memory-mb",
                                  "32",
                                  "--price-per-gpu-hour",
                                  std::to_string(price),
                                  "--gpus",
                                  std::to_string(kGpus),
                                  "--capacity-class",
                                  capacity_class,
                                  "--metrics-port",
                                  "0",
                                  "--gateway",
                                  "127.0.0.1:" + std::to_string(gateway_.control_port)};
    if (kind == "decode") args.insert(args.end(), {"--role", "decode"});
    w.process = std::make_unique<Process>(args, w.log);
    w.pid = w.process->pid();
    return w;
  }

  static double NowUnix() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static double OwnBusySeconds(const StartedWorker& w) {
    return testing::WorkerMetric(w.log, "pdserve_busy_seconds_total");
  }

  static constexpr int kGpus = 2;

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
  constexpr double kPrefillPrice = 4.0, kDecodePrice = 1.5;  // USD per GPU-hour
  StartedWorker prefill = StartWorker("prefill", kPrefillPrice, "reserved");
  StartedWorker decode = StartWorker("decode", kDecodePrice, "burst");
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 2, std::chrono::seconds(60), "alpha-key"));
  prefill.registered_unix = decode.registered_unix = NowUnix();

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

  // A client that gives up once three tokens came: its request is cancelled on both workers and
  // still has a row (given up on tokens, not on a timeout, which the tiny model can outrun).
  testing::RunCurl(
      CurlCommand("alpha-key", Body("give up", 3000, true), 60, ""), /*chunks=*/3, [] {},
      /*hang_up=*/true);
  // A request whose decode worker dies mid-stream resumes on a second decode worker started
  // then: the attempt on the dead one is a "resumed" row (retry waste: the second recomputes
  // it), the last an ok row with every token. The worker is killed once a few tokens have
  // streamed, not after a fixed delay, which the tiny model can outrun.
  StartedWorker second;
  auto resumed = Post("beta-key", Body("doomed", 3000, true), 60, "", /*tokens=*/3, [&] {
    decode.own_busy = OwnBusySeconds(decode);
    decode.killed = true;
    decode.stopped_unix = NowUnix();
    decode.process->Kill(SIGKILL);
    decode.gone_unix = NowUnix();
    second = StartWorker("decode", kDecodePrice, "burst");
  });
  EXPECT_EQ(resumed.body.find("data: {\"error\""), std::string::npos)
      << resumed.body.substr(0, 300);
  std::string resumed_id;
  for (size_t pos = 0; (pos = resumed.body.find("data: {", pos)) != std::string::npos; ++pos) {
    auto chunk = nlohmann::json::parse(
        resumed.body.substr(pos + 6, resumed.body.find("\n\n", pos) - pos - 6));
    if (chunk.contains("usage") && !chunk["usage"].is_null()) {
      resumed_id = chunk["id"];
      seen[resumed_id] = {chunk["usage"]["prompt_tokens"], chunk["usage"]["completion_tokens"],
                          chunk["usage"]["cost_usd"], "team-b"};
    }
  }
  ASSERT_FALSE(resumed_id.empty()) << resumed.body.substr(0, 300);
  EXPECT_EQ(seen[resumed_id].completion, 3000);

  // Drain the survivors so their periods end with every step reported, then read the ledger.
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 2, std::chrono::seconds(60), "alpha-key"));
  auto last = Post("alpha-key", Body("after", 4, false));
  ASSERT_EQ(last.status, 200) << last.body;
  {
    auto j = nlohmann::json::parse(last.body);
    seen[j["id"]] = {j["usage"]["prompt_tokens"], j["usage"]["completion_tokens"],
                     j["usage"]["cost_usd"], "team-a"};
  }
  second.registered_unix = NowUnix();
  for (StartedWorker* w : {&prefill, &second}) w->own_busy = OwnBusySeconds(*w);
  prefill.stopped_unix = second.stopped_unix = NowUnix();
  prefill.process->Signal(SIGTERM);
  second.process->Signal(SIGTERM);
  EXPECT_EQ(prefill.process->Wait(std::chrono::seconds(20)), 0);
  prefill.gone_unix = NowUnix();
  EXPECT_EQ(second.process->Wait(std::chrono::seconds(20)), 0);
  second.gone_unix = NowUnix();
  // The gateway has seen every worker go, and written their periods' ends.
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 0, std::chrono::seconds(20), "alpha-key"));
  testing::WaitForLedgerCommitted(gateway_.http_port);

  // Every row seen by a client matches what it saw; every row's cost is its step seconds priced
  // at what the test gave its workers; per worker, the step seconds of its rows add up.
  auto rows = Export();
  std::map<std::string, int> statuses;
  std::map<int64_t, double> row_seconds;  // by gateway worker id: the step seconds of its rows
  size_t matched = 0;
  const double gpu_hours_per_second = kGpus / 3600.0;
  for (const auto& row : rows) {
    statuses[row["status"]]++;
    for (const char* side : {"prefill", "decode"}) {
      const auto& worker = row[std::string(side) + "_worker"];
      if (worker["id"] == 0) continue;
      EXPECT_EQ(worker["gpu_count"], kGpus) << row.dump();
      row_seconds[worker["id"].get<int64_t>()] +=
          row[std::string(side) + "_step_seconds"].get<double>();
    }
    const double want =
        row["prefill_step_seconds"].get<double>() * gpu_hours_per_second * kPrefillPrice +
        row["decode_step_seconds"].get<double>() * gpu_hours_per_second * kDecodePrice;
    EXPECT_EQ(row["egress_cost_usd"], 0.0) << "no zones were named: " << row.dump();
    EXPECT_NEAR(row["cost_usd"].get<double>(), want, 1e-15 + 1e-9 * want) << row.dump();
    auto it = seen.find(row["request_id"]);
    if (it == seen.end()) continue;
    if (row["status"] == "resumed") {  // the resumed request's first attempt
      EXPECT_EQ(row["request_id"], resumed_id) << row.dump();
      EXPECT_GT(row["cost_usd"].get<double>(), 0) << row.dump();
      continue;
    }
    ++matched;
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
  EXPECT_EQ(matched, seen.size()) << "rows whose request the client saw";
  EXPECT_EQ(statuses["ok"], 8);
  EXPECT_EQ(statuses["cancelled"], 1);
  EXPECT_EQ(statuses["resumed"], 1);
  EXPECT_EQ(statuses["error"] + statuses["retried"], 0);

  // Per worker, from the report over the same ledger, against what the test knows: the price
  // and GPUs it gave, the lifetime it measured, the busy time the worker counted itself.
  auto report = nlohmann::json::parse(testing::RunPdserve(
      "report --format json --ledger " + ledger_ + " --prices " + (dir_ / "prices.json")));
  ASSERT_TRUE(report.contains("workers")) << report.dump();
  EXPECT_EQ(report["workers"].size(), 3u);
  size_t known = 0;
  for (const auto& w : report["workers"]) {
    const std::string name = w["name"];
    const StartedWorker* process = nullptr;
    for (const StartedWorker* p : {&prefill, &decode, &second}) {
      if (name.size() > std::to_string(p->pid).size() &&
          name.substr(name.rfind(':') + 1) == std::to_string(p->pid)) {
        process = p;
      }
    }
    ASSERT_NE(process, nullptr) << "a worker the test did not start: " << w.dump();
    ++known;
    const double uptime = w["uptime_seconds"], busy = w["busy_seconds"];
    const double usd_per_second = gpu_hours_per_second * process->price;
    EXPECT_GE(busy, 0) << w.dump();
    EXPECT_LE(busy, uptime) << w.dump();
    // Billed within the process's lifetime as the test saw it, from both sides: registered after
    // it started and gone once it exited (the gateway may see the exit a little after the test
    // does); and up at least from when the test saw it registered to when it was stopped, less
    // 0.25 s (a killed worker's period ends when the gateway last heard from it: it was streaming).
    EXPECT_LE(uptime, process->gone_unix - process->spawned_unix + 0.5) << w.dump();
    EXPECT_GE(uptime, process->stopped_unix - process->registered_unix - 0.25) << w.dump();
    EXPECT_NEAR(w["capacity_cost_usd"].get<double>(), uptime * usd_per_second,
                1e-9 * uptime * usd_per_second)
        << w.dump();
    EXPECT_GE(w["idle_waste_usd"].get<double>(), 0) << w.dump();
    EXPECT_NEAR(w["idle_waste_usd"].get<double>(), (uptime - busy) * usd_per_second,
                1e-9 * uptime * usd_per_second)
        << w.dump();
    // Conservation's request side from the rows, its busy side from the worker itself.
    const double rows_busy = row_seconds[w["id"].get<int64_t>()];
    EXPECT_NEAR(rows_busy, busy, 1e-12 + 1e-9 * busy) << w.dump();
    EXPECT_NEAR(w["request_cost_usd"].get<double>() + w["retry_waste_usd"].get<double>(),
                rows_busy * usd_per_second, 1e-15 + 1e-9 * rows_busy * usd_per_second)
        << w.dump();
    EXPECT_GT(process->own_busy, 0) << w.dump();
    if (process->killed) {  // its counter was read before its last steps
      EXPECT_GE(busy, process->own_busy - 1e-9) << w.dump();
    } else {
      EXPECT_NEAR(busy, process->own_busy, 1e-9 + 1e-9 * process->own_busy) << w.dump();
    }
    const double capacity = w["capacity_cost_usd"];
    const double parts = w["request_cost_usd"].get<double>() + w["retry_waste_usd"].get<double>() +
                         w["idle_waste_usd"].get<double>();
    EXPECT_GT(capacity, 0);
    EXPECT_NEAR(parts, capacity, 1e-9 * capacity) << w.dump();
  }
  EXPECT_EQ(known, 3u);
  const auto& overall = report["overall"];
  const double capacity = overall["capacity_cost_usd"];
  EXPECT_NEAR(overall["request_cost_usd"].get<double>() + overall["retry_waste_usd"].get<double>() +
                  overall["idle_waste_usd"].get<double>(),
              capacity, 1e-9 * capacity);
  EXPECT_GT(overall["retry_waste_usd"].get<double>(), 0);
  EXPECT_GT(overall["apis"]["api-x"]["api_cost_usd"].get<double>(), 0);

  // Without a price sheet: the same self-hosted costs, and no API to compare with.
  auto own = nlohmann::json::parse(testing::RunPdserve("report --format json --ledger " + ledger_),
                                   nullptr, false);
  ASSERT_TRUE(own.is_object());
  EXPECT_DOUBLE_EQ(own["overall"]["capacity_cost_usd"].get<double>(), capacity);
  EXPECT_TRUE(own["overall"]["apis"].empty()) << own["overall"]["apis"].dump();
  const auto asks_for_api =
      testing::RunPdserveWithOutput("report --ledger " + ledger_ + " --api x");
  EXPECT_NE(asks_for_api.exit_code, 0);
  EXPECT_NE(asks_for_api.err.find("--prices"), std::string::npos) << asks_for_api.err;
}

TEST_F(CostLedgerTest, RowsQueuedAtATermAreCommittedBeforeTheGatewayExits) {
  auto worker = testing::StartColocatedWorker(model_, gateway_.control_port, dir_ / "w.log");
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 1, std::chrono::seconds(60), "alpha-key"));
  std::set<std::string> answered;
  for (int i = 0; i < 5; ++i) {
    auto r = Post("alpha-key", Body("term " + std::to_string(i), 2, false));
    ASSERT_EQ(r.status, 200) << r.body;
    answered.insert(nlohmann::json::parse(r.body)["id"].get<std::string>());
  }
  gateway_.process->Signal(SIGTERM);  // at once: its last rows may still be queued
  EXPECT_EQ(gateway_.process->Wait(std::chrono::seconds(20)), 0);
  for (const auto& row : Export()) answered.erase(row["request_id"].get<std::string>());
  EXPECT_TRUE(answered.empty()) << answered.size() << " answered request(s) have no row";
}

TEST_F(CostLedgerTest, ACommittedRowSurvivesKillNineOfTheGatewayAndItsRestartAddsToIt) {
  auto worker = testing::StartColocatedWorker(model_, gateway_.control_port, dir_ / "w.log");
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 1, std::chrono::seconds(60), "alpha-key"));
  auto r = Post("alpha-key", Body("durable", 4, false));
  ASSERT_EQ(r.status, 200) << r.body;
  // What kill -9 can lose is the buffer (docs/architecture.md, "The ledger's writes"): once it
  // is empty, the row is the file's.
  testing::WaitForLedgerCommitted(gateway_.http_port);
  gateway_.process->Kill(SIGKILL);
  const std::string id = nlohmann::json::parse(r.body)["id"];
  bool found = false;
  for (const auto& row : Export()) found = found || row["request_id"] == id;
  EXPECT_TRUE(found) << "the row of " << id << " is not in the ledger after kill -9";
  // And the gateway starts again on the same ledger, and adds to it.
  worker->Kill(SIGKILL);
  StartGateway();
  worker = testing::StartColocatedWorker(model_, gateway_.control_port, dir_ / "w2.log");
  ASSERT_TRUE(
      testing::WaitForWorkerLoad(gateway_.http_port, 1, std::chrono::seconds(60), "alpha-key"));
  auto again = Post("alpha-key", Body("after the restart", 4, false));
  ASSERT_EQ(again.status, 200) << again.body;
  const auto answer = nlohmann::json::parse(again.body);
  EXPECT_EQ(answer["usage"]["completion_tokens"], 4) << again.body;
  std::set<std::string> ids;
  for (const auto& row : Export()) ids.insert(row["request_id"].get<std::string>());
  EXPECT_TRUE(ids.count(id)) << "the row from before the restart is gone";
  EXPECT_TRUE(ids.count(answer["id"].get<std::string>())) << "no row for " << answer["id"];
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
