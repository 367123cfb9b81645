// End to end: data residency (docs/architecture.md, "Residency and external APIs";
// router/router.h). Simulated workers in zones br and us behind one gateway: a tenant whose
// keys-file line says zones=br is only ever served by workers registered in br, a tenant without
// zones by either; a tenant pinned to a zone with no worker waits and gets 503 rather than going
// elsewhere; a pinned request whose worker fails is retried in its zone only; and KV that moves
// between zones is charged at the egress price.
#include <gtest/gtest.h>

#include <fstream>
#include <future>
#include <set>
#include <string>
#include <vector>

#include "tests/e2e/process.h"
#include "tests/e2e/serving_metrics.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::HttpConnection;
using testing::HttpResponse;
using testing::Process;
using testing::WaitFor;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

class ResidencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "pdserve make-model failed";
    std::ofstream(dir_ / "keys")
        << "key:sk-br br zones=br\nkey:sk-any any\nkey:sk-eu eu zones=eu\n";
    std::ofstream(dir_ / "fixed.json") << R"({
      "name": "fixed", "device": "test",
      "prefill": {"base": 0.02, "per_token": 0, "per_context": 0},
      "decode": {"base": 0.005, "per_token": 0, "per_context": 0},
      "range": {"prompt_tokens": 4096, "decode_tokens": 256, "max_context": 4096},
      "kv_bytes_per_token": 65536, "kv_bytes_per_second": 1e9, "n_layers": 2,
      "page_size": 16, "kv_pages": 2048, "cold_start_seconds": 0})";
    gateway_ =
        testing::StartGateway(dir_.path(), model_,
                              {"--api-keys", dir_ / "keys", "--ledger", dir_ / "ledger.sqlite",
                               "--egress-usd-per-gb", std::to_string(kEgressUsdPerGb)});
    ASSERT_TRUE(gateway_.process) << testing::ReadLog(dir_ / "gateway.log");
    http_ = gateway_.http_port;
  }

  // One `pdserve sim` process of simulated workers in `zone` with these counts and flags.
  void StartSim(const std::string& zone, const std::string& name, std::vector<std::string> flags) {
    flags.insert(flags.begin(), {"--zone", zone});
    const auto args = testing::SimArgs(model_, gateway_.control_port, dir_ / "fixed.json", flags);
    sims_.push_back(std::make_unique<Process>(args, dir_ / ("sim-" + name + ".log")));
  }

  void WaitForWorkers(size_t n) {
    ASSERT_TRUE(WaitFor([&] { return testing::WorkerLoad(http_, "sk-any").size() == n; },
                        std::chrono::seconds(60)))
        << testing::WorkerLoad(http_, "sk-any").dump();
  }

  // Sends `n` requests of tenant key `key` at once; each answer's status.
  std::vector<HttpResponse> PostMany(const std::string& key, int n) {
    std::vector<std::future<HttpResponse>> sent;
    for (int i = 0; i < n; ++i) {
      sent.push_back(std::async(
          std::launch::async, [this, key, i] { return Post(key, "prompt " + std::to_string(i)); }));
    }
    std::vector<HttpResponse> answers;
    for (auto& f : sent) answers.push_back(f.get());
    return answers;
  }

  Json LedgerRows() {
    testing::WaitForLedgerCommitted(http_);
    return Json::parse(testing::RunPdserve("ledger export --format json --ledger " +
                                           std::string(dir_ / "ledger.sqlite")),
                       nullptr, false);
  }

  HttpResponse Post(const std::string& key, const std::string& prompt,
                    std::vector<std::string> headers = {}) {
    headers.push_back("Authorization: Bearer " + key);
    const std::string body =
        Json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 4}, {"ignore_eos", true}}.dump();
    HttpConnection c(http_);
    HttpResponse r;
    std::string error;
    if (!c.Send(testing::HttpRequestText("POST", "/v1/completions", body, headers))) return r;
    c.ReadResponse(&r, Clock::now() + std::chrono::seconds(60), &error);
    return r;
  }

  static constexpr double kEgressUsdPerGb = 0.09;
  TempDir dir_;
  std::string model_;
  testing::StartedGateway gateway_;
  std::vector<std::unique_ptr<Process>> sims_;
  int http_ = 0;
};

TEST_F(ResidencyTest, ATenantPinnedToAZoneIsServedOnlyThere) {
  for (const char* zone : {"br", "us"}) {
    StartSim(zone, zone, {"--prefill", "1", "--decode", "1", "--colocated", "1"});
  }
  WaitForWorkers(6);
  std::vector<std::future<HttpResponse>> sent;
  for (int i = 0; i < 24; ++i) {
    const std::string key = i % 2 == 0 ? "sk-br" : "sk-any";
    sent.push_back(std::async(std::launch::async,
                              [this, key, i] { return Post(key, "prompt " + std::to_string(i)); }));
  }
  for (auto& f : sent) {
    const HttpResponse r = f.get();
    EXPECT_EQ(r.status, 200) << r.body;
  }
  const Json rows = LedgerRows();
  ASSERT_TRUE(rows.is_array());
  int br_rows = 0;
  std::set<std::string> any_zones;
  for (const Json& row : rows) {
    if (row["tenant"] == "br") {
      ++br_rows;
      EXPECT_EQ(row["prefill_worker"]["zone"], "br") << row.dump();
      EXPECT_EQ(row["decode_worker"]["zone"], "br") << row.dump();
    } else {
      any_zones.insert(row["decode_worker"]["zone"].get<std::string>());
    }
  }
  EXPECT_GE(br_rows, 12);
  EXPECT_EQ(any_zones.count("us"), 1u) << "the unpinned tenant was never served in us";

  // No worker in eu: the request waits out its deadline rather than leave its zone.
  const HttpResponse eu = Post("sk-eu", "nowhere", {"x-pdserve-queue-timeout-ms: 500"});
  EXPECT_EQ(eu.status, 503) << eu.body;
  EXPECT_NE(eu.body.find("queue_timeout"), std::string::npos) << eu.body;
}

TEST_F(ResidencyTest, APinnedRequestWhoseWorkerFailsIsRetriedInItsZoneOnly) {
  // In br, one process whose steps all fail from its first second on, and one that works; in us,
  // one that works and is as idle as any.
  StartSim("br", "br-failing", {"--prefill", "1", "--decode", "1", "--fail-after", "0"});
  StartSim("br", "br", {"--prefill", "1", "--decode", "1"});
  StartSim("us", "us", {"--prefill", "1", "--decode", "1"});
  WaitForWorkers(6);
  for (const HttpResponse& r : PostMany("sk-br", 16)) EXPECT_EQ(r.status, 200) << r.body;
  const Json rows = LedgerRows();
  ASSERT_TRUE(rows.is_array());
  int attempts = 0, failed = 0;
  for (const Json& row : rows) {
    if (row["tenant"] != "br") continue;
    ++attempts;
    if (row["status"] != "ok") ++failed;
    EXPECT_EQ(row["prefill_worker"]["zone"], "br") << row.dump();
    EXPECT_EQ(row["decode_worker"]["zone"], "br") << row.dump();
  }
  EXPECT_GE(attempts, 16);
  EXPECT_GE(failed, 1) << "no attempt failed: the retry this test is about never happened";
}

TEST_F(ResidencyTest, KvCrossingZonesIsChargedAtTheEgressPrice) {
  // Prefill only in us, decode only in br: an unpinned request's KV always crosses; a request
  // pinned to br has no prefill worker in its zone and waits rather than prefill in us.
  StartSim("us", "us-prefill", {"--prefill", "1", "--decode", "0", "--price-per-gpu-hour", "2"});
  StartSim("br", "br-decode", {"--prefill", "0", "--decode", "1", "--price-per-gpu-hour", "2"});
  WaitForWorkers(2);
  for (const HttpResponse& r : PostMany("sk-any", 6)) EXPECT_EQ(r.status, 200) << r.body;
  const HttpResponse pinned = Post("sk-br", "stays home", {"x-pdserve-queue-timeout-ms: 500"});
  EXPECT_EQ(pinned.status, 503) << pinned.body;

  const Json rows = LedgerRows();
  ASSERT_TRUE(rows.is_array());
  int crossed = 0;
  for (const Json& row : rows) {
    if (row["tenant"] == "br") {  // it never ran: its row says it timed out in the queue
      EXPECT_EQ(row["status"], "refused") << "the pinned request ran: " << row.dump();
      EXPECT_EQ(row["admission"], "queue_timeout") << row.dump();
      EXPECT_EQ(row["prefill_worker"]["id"], 0) << row.dump();
      continue;
    }
    if (row["tenant"] != "any" || row["status"] != "ok") continue;
    ++crossed;
    EXPECT_EQ(row["prefill_worker"]["zone"], "us") << row.dump();
    EXPECT_EQ(row["decode_worker"]["zone"], "br") << row.dump();
    // The profile's model: 65,536 bytes a token over the prompt's whole pages of 16, not the
    // simulated worker's small pages that carry them.
    const auto kv_bytes = row["kv_bytes"].get<int64_t>();
    const int64_t pages = (row["prompt_tokens"].get<int64_t>() + 15) / 16;
    EXPECT_EQ(kv_bytes, pages * 16 * 65536) << row.dump();
    EXPECT_DOUBLE_EQ(row["egress_cost_usd"].get<double>(),
                     static_cast<double>(kv_bytes) / 1e9 * kEgressUsdPerGb)
        << row.dump();
    EXPECT_GT(row["cost_usd"].get<double>(), row["egress_cost_usd"].get<double>()) << row.dump();
  }
  EXPECT_EQ(crossed, 6);
}

}  // namespace
}  // namespace pdserve
