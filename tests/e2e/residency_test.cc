// End to end: data residency (docs/architecture.md, "External APIs (overflow)"; router/router.h).
// Simulated workers in zones br and us behind one gateway: a tenant whose keys-file line says
// zones=br is only ever served by workers registered in br, a tenant without zones by either, and
// a tenant pinned to a zone with no worker waits and gets 503 rather than going elsewhere.
#include <gtest/gtest.h>

#include <fstream>
#include <future>

#include "tests/e2e/process.h"
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
    gateway_ = testing::StartGateway(
        dir_.path(), model_, {"--api-keys", dir_ / "keys", "--ledger", dir_ / "ledger.sqlite"});
    ASSERT_TRUE(gateway_.process) << testing::ReadLog(dir_ / "gateway.log");
    http_ = gateway_.http_port;
    for (const char* zone : {"br", "us"}) {
      sims_.push_back(std::make_unique<Process>(
          std::vector<std::string>{"sim", "--model", model_, "--gateway",
                                   "127.0.0.1:" + std::to_string(gateway_.control_port),
                                   "--profile", dir_ / "fixed.json", "--prefill", "1", "--decode",
                                   "1", "--colocated", "1", "--zone", zone},
          dir_ / (std::string("sim-") + zone + ".log")));
    }
    ASSERT_TRUE(WaitFor([&] { return testing::WorkerLoad(http_, "sk-any").size() == 6; },
                        std::chrono::seconds(60)))
        << testing::WorkerLoad(http_, "sk-any").dump();
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

  TempDir dir_;
  std::string model_;
  testing::StartedGateway gateway_;
  std::vector<std::unique_ptr<Process>> sims_;
  int http_ = 0;
};

TEST_F(ResidencyTest, ATenantPinnedToAZoneIsServedOnlyThere) {
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
  const Json rows = Json::parse(testing::RunPdserve("ledger export --format json --ledger " +
                                                    std::string(dir_ / "ledger.sqlite")),
                                nullptr, false);
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

}  // namespace
}  // namespace pdserve
