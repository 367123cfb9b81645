// End to end: the workers' prefix caches, with real processes on loopback. A conversation's second
// turn (the first turn's prompt and answer, then new text) must produce `pdserve generate`'s
// tokens while the workers reuse the first turn's KV: a colocated worker and a prefill worker
// count cache hits on their /metrics, and a decode worker that holds a prompt's leading blocks is
// sent fewer KV bytes. With --prefix-cache off nothing is found cached.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/process.h"

namespace pdserve {
namespace {

using testing::Curl;
using testing::Process;

// Several KV pages of text (16 tokens a page), so that whole blocks repeat.
const std::string kTurn1 =
    "User: tell me about the cats that live in the old library on the hill, what they eat, "
    "where they sleep, and who looks after them in the long winter months when nobody visits. "
    "Assistant:";

class PrefixCacheTest : public testing::GatewayFixture {
 protected:
  std::unique_ptr<Process> StartWorker(const std::string& kind, const std::string& log,
                                       std::vector<std::string> extra = {}) {
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
  double Metric(const std::string& log, const std::string& name) {
    return testing::WorkerMetric(dir_ / log, name);
  }
  void WaitForWorkers(size_t n) {
    ASSERT_TRUE(testing::WaitForWorkerLoad(http_, n, std::chrono::seconds(60)))
        << "the workers did not register";
  }
  // A greedy completion's text (12 tokens), checked against `pdserve generate`.
  std::string Turn(const std::string& prompt) {
    testing::ExpectGreedyMatchesGenerate(http_, model_, prompt);
    auto r = Curl(http_, "/v1/completions",
                  nlohmann::json{{"model", "tiny"},
                                 {"prompt", prompt},
                                 {"max_tokens", 12},
                                 {"temperature", 0},
                                 {"ignore_eos", true}}
                      .dump());
    EXPECT_EQ(r.status, 200) << r.body;
    if (r.status != 200) return "";
    return nlohmann::json::parse(r.body)["choices"][0]["text"];
  }
  // Two turns of one conversation; the second repeats the first and its answer.
  void Converse() {
    const std::string answer = Turn(kTurn1);
    Turn(kTurn1 + answer + "\nUser: and in summer?\nAssistant:");
  }
};

TEST_F(PrefixCacheTest, ColocatedWorkerReusesTheFirstTurnsKv) {
  auto w = StartWorker("decode", "both.log", {"--role", "both"});
  WaitForWorkers(1);
  Converse();
  EXPECT_GT(Metric("both.log", "pdserve_prefix_cache_hits_total"), 0);
  EXPECT_GT(Metric("both.log", "pdserve_prefix_cache_queries_total"),
            Metric("both.log", "pdserve_prefix_cache_hits_total"));
  EXPECT_GT(Metric("both.log", "pdserve_prefix_cache_pages"), 0);
  testing::ExpectPagesReturnToZero(dir_ / "both.log");
}

TEST_F(PrefixCacheTest, OffComputesEveryPromptToken) {
  auto w = StartWorker("decode", "both.log", {"--role", "both", "--prefix-cache", "off"});
  WaitForWorkers(1);
  Converse();
  EXPECT_EQ(Metric("both.log", "pdserve_prefix_cache_hits_total"), 0);
  EXPECT_EQ(Metric("both.log", "pdserve_prefix_cache_pages"), 0);
}

TEST_F(PrefixCacheTest, DisaggregatedWorkersReuseAndSendLess) {
  auto p = StartWorker("prefill", "prefill.log");
  auto d = StartWorker("decode", "decode.log", {"--role", "decode"});
  WaitForWorkers(2);
  Converse();
  EXPECT_GT(Metric("prefill.log", "pdserve_prefix_cache_hits_total"), 0);
  // A new prompt, then the same again: the decode worker holds its leading blocks the second
  // time, and the prefill worker sends only the rest.
  const std::string prompt = "Once upon a time, in a house full of books and old clocks, " + kTurn1;
  const auto send = [&] {
    const double before = Metric("prefill.log", "pdserve_kv_transfer_bytes_total");
    auto r = Curl(http_, "/v1/completions",
                  nlohmann::json{{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 4}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Metric("prefill.log", "pdserve_kv_transfer_bytes_total") - before;
  };
  const double first = send();
  const double second = send();
  EXPECT_GT(first, 0);
  EXPECT_GT(second, 0);  // the last prompt page is always sent
  EXPECT_LT(second, first / 2) << "the decode worker was sent its cached blocks again";
  testing::ExpectPagesReturnToZero(dir_ / "prefill.log");
  testing::ExpectPagesReturnToZero(dir_ / "decode.log");
  // Both workers' KV events reached the gateway in order, each snapshot asked for.
  const std::string gateway_log = testing::ReadLog(dir_ / "gateway.log");
  EXPECT_EQ(gateway_log.find("KV events out of order"), std::string::npos) << gateway_log;
  EXPECT_EQ(gateway_log.find("KV snapshot nobody asked for"), std::string::npos) << gateway_log;
}

}  // namespace
}  // namespace pdserve
