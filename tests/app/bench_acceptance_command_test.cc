// `pdserve bench acceptance` as a buyer runs it: against a real `pdserve bench fake-server`
// process on an OS-chosen port, with the KV bandwidth test on (a real `bench kv` on loopback).
// The HTML must show the KV rows the JSON holds (figures formatted from the JSON, not constant
// text), MFU must follow from the runs' token counts, `--require` must give PASS with exit 0
// for thresholds the run meets and FAIL with exit 3 for ones it cannot, naming each measured
// value, bad thresholds are refused before any load, and `--compare-with` shows the
// differences of two runs.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/command_run.h"
#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using nlohmann::json;
using pdserve::testing::Pdserve;
using pdserve::testing::ReadFile;

// A fake OpenAI server on a port the OS chose; its URL once it says it listens.
class FakeServer {
 public:
  explicit FakeServer(const std::string& log)
      : log_(log), process_({"bench", "fake-server", "--port", "0"}, log) {}
  std::string Url() {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < end) {
      const std::string text = ReadFile(log_);
      const size_t at = text.find("listening on http://");
      if (at != std::string::npos && text.find(" (Ctrl-C", at) != std::string::npos) {
        const size_t from = at + std::string("listening on ").size();
        return text.substr(from, text.find(' ', from) - from);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
  }

 private:
  std::string log_;
  pdserve::testing::Process process_;
};

// The acceptance files one run wrote into `dir` (one run per folder).
struct Written {
  json doc;
  std::string html, text, json_path;
};

Written ReadWritten(const std::string& dir) {
  Written w;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("acceptance-", 0) == 0 && entry.path().extension() == ".json") {
      w.json_path = entry.path().string();
    }
  }
  if (w.json_path.empty()) return w;
  const std::string base = w.json_path.substr(0, w.json_path.size() - 5);
  w.doc = json::parse(ReadFile(w.json_path), nullptr, false);
  w.html = ReadFile(base + ".html");
  w.text = ReadFile(base + ".txt");
  return w;
}

std::string SizeName(uint64_t bytes) {
  if (bytes % (1u << 20) == 0) return fmt::format("{}MiB", bytes >> 20);
  return fmt::format("{}KiB", bytes >> 10);
}

class BenchAcceptanceCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FakeServer>(dir_ / "fake.log");
    url_ = server_->Url();
    ASSERT_FALSE(url_.empty()) << ReadFile(dir_ / "fake.log");
  }
  // One acceptance run into its own folder; 120 s at most.
  pdserve::testing::CommandRun Accept(const std::string& out, const std::string& extra) {
    std::filesystem::create_directories(out);
    return Pdserve("bench acceptance --base-url " + url_ +
                       " --model fake --num-prompts 20 --random-input-len 32 --random-output-len 8"
                       " --sweep 50 --goodput ttft:2000 --gpu-hour-price 2 --kv-transport tcp"
                       " --kv-max-bytes 1048576 --provider test-cloud --output-dir " +
                       out + " " + extra,
                   120);
  }

  model::testing::TempDir dir_;
  std::unique_ptr<FakeServer> server_;
  std::string url_;
};

TEST_F(BenchAcceptanceCommandTest, ReportShowsMeasuredKvRowsAndPassesItsThresholds) {
  const std::string out = dir_ / "pass";
  // The model's FLOPs per token and the device's peak, as `pdserve bench engine --json` says.
  const std::string engine = dir_ / "engine.json";
  std::ofstream(engine) << R"({"device":"cpu","threads":2,"prefill_flops_per_token":2e6,
                              "decode_flops_per_token":3e6,"fma_gflops":50})";
  auto run = Accept(out, "--mfu-from " + engine +
                             " --require 'kv_gbps_at_1MiB>=0.0001 ttft_p99_ms<=60000 "
                             "goodput_rps>=0.01 usd_per_1m_output_tokens<=1000000 mfu>0'");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  Written w = ReadWritten(out);
  ASSERT_TRUE(w.doc.is_object()) << run.out;
  ASSERT_EQ(w.doc["kv_bandwidth"]["status"], "ok");
  const json rows = w.doc["kv_bandwidth"]["results"];
  ASSERT_EQ(rows.size(), 5u);  // 64 KiB to 1 MiB, doubling
  for (const json& r : rows) {
    const uint64_t bytes = r["bytes"];
    const std::string cells = fmt::format("<td>{}</td><td>{}</td><td>{:.3f}</td>", SizeName(bytes),
                                          bytes, r["gbps"].get<double>());
    EXPECT_NE(w.html.find(cells), std::string::npos) << cells;
    const std::string ratio =
        fmt::format("<td>{:.3f}</td><td>{:.3f} / {:.3f}</td>", r["ratio"].get<double>(),
                    r["ratio_p25"].get<double>(), r["ratio_p75"].get<double>());
    EXPECT_NE(w.html.find(ratio), std::string::npos) << ratio;
  }
  EXPECT_EQ(w.html.find("not run"), std::string::npos);
  EXPECT_NE(w.html.find("KV bandwidth against message size"), std::string::npos);
  EXPECT_NE(w.html.find("loopback"), std::string::npos);  // the peer
  // The verdict opens the report: the title, then the first section.
  EXPECT_NE(w.html.find("<h1>pdserve acceptance report: PASS</h1>\n<h2>Verdict</h2>"),
            std::string::npos);
  EXPECT_EQ(w.doc["verdict"]["result"], "PASS");
  EXPECT_EQ(w.text.rfind("ACCEPTANCE PASS", 0), 0u) << w.text;
  // Each threshold's measured value, as the JSON has it.
  const json& kv = w.doc["verdict"]["thresholds"][0];
  EXPECT_EQ(kv["measured"].get<double>(), rows[4]["gbps"].get<double>());
  EXPECT_NE(w.html.find(fmt::format("<td>kv_gbps_at_1MiB&gt;=0.0001</td><td>{:.4g}</td>",
                                    rows[4]["gbps"].get<double>())),
            std::string::npos);
  // The environment is measured or says why not: no bare constants.
  const std::string nccl = w.doc["environment"]["nccl_version"];
  EXPECT_TRUE(nccl.rfind("not loaded", 0) == 0 || nccl.find('.') != std::string::npos) << nccl;
  EXPECT_EQ(w.doc["hosts"].size(), 3u);  // runner, serving target, KV receiver
  // MFU from the run's own token counts and duration over the peak.
  const json& served = w.doc["serve"]["runs"][0];
  const double mfu = (2e6 * served["total_input_tokens"].get<double>() +
                      3e6 * served["total_output_tokens"].get<double>()) /
                     served["duration"].get<double>() / 50e9;
  EXPECT_NEAR(served["mfu"].get<double>(), mfu, 1e-12 * mfu);
  EXPECT_NE(w.html.find(fmt::format("<th>MFU at rate 50</th><td>{:.3f}%</td>", mfu * 100)),
            std::string::npos);
}

TEST_F(BenchAcceptanceCommandTest, FailingThresholdsExitThreeAndCompareWithShowsDifferences) {
  const std::string first = dir_ / "first", second = dir_ / "second";
  auto one = Accept(first, "--require 'ttft_p99_ms<=60000'");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const Written a = ReadWritten(first);
  ASSERT_TRUE(a.doc.is_object());

  // Thresholds no run can meet, and a comparison with the first run.
  auto two = Accept(second,
                    "--require 'kv_gbps_at_64KiB>=1000000 ttft_p99_ms<=0.000001' "
                    "--compare-with " +
                        a.json_path);
  ASSERT_EQ(two.exit_code, 3) << two.out;
  const Written b = ReadWritten(second);
  ASSERT_TRUE(b.doc.is_object()) << two.out;
  EXPECT_EQ(b.doc["verdict"]["result"], "FAIL");
  EXPECT_NE(b.html.find("<h1>pdserve acceptance report: FAIL</h1>"), std::string::npos);
  EXPECT_EQ(b.text.rfind("ACCEPTANCE FAIL: 2 of 2 thresholds not met", 0), 0u) << b.text;
  EXPECT_EQ(b.doc["verdict"]["thresholds"][0]["measured"],
            b.doc["kv_bandwidth"]["results"][0]["gbps"]);

  // The comparison: the 64 KiB KV figure of each run, and the verdict going from PASS to FAIL.
  ASSERT_TRUE(b.doc["comparison"].is_object());
  bool saw_kv = false, saw_verdict = false;
  for (const json& r : b.doc["comparison"]["rows"]) {
    if (r["figure"] == "KV GB/s at 64KiB") {
      saw_kv = true;
      EXPECT_EQ(r["before"], a.doc["kv_bandwidth"]["results"][0]["gbps"]);
      EXPECT_EQ(r["after"], b.doc["kv_bandwidth"]["results"][0]["gbps"]);
      EXPECT_NE(b.html.find(fmt::format("<td>KV GB/s at 64KiB</td><td>{:.4g}</td><td>{:.4g}</td>",
                                        r["before"].get<double>(), r["after"].get<double>())),
                std::string::npos);
    }
    if (r["figure"] == "verdict") {
      saw_verdict = true;
      EXPECT_EQ(r["before"], "PASS");
      EXPECT_EQ(r["after"], "FAIL");
    }
  }
  EXPECT_TRUE(saw_kv && saw_verdict) << b.doc["comparison"].dump(1);
  EXPECT_NE(b.html.find("Comparison with an earlier run"), std::string::npos);
  EXPECT_NE(b.text.find("verdict: PASS -> FAIL (changed)"), std::string::npos) << b.text;
}

// Two hosts as two processes: a `bench kv --listen` receiver (its own process, as on another
// node) and the acceptance run given `--kv-peer`. The report names the peer and the receiving
// host's own facts, as it sent them.
TEST_F(BenchAcceptanceCommandTest, KvPeerIsReportedWithTheReceiversOwnFacts) {
  const std::string log = dir_ / "receiver.log";
  pdserve::testing::Process receiver({"bench", "kv", "--listen", "0", "--max-bytes", "1048576"},
                                     log);
  std::string port;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (port.empty() && std::chrono::steady_clock::now() < end) {
    const std::string text = ReadFile(log);
    const size_t at = text.find("listening on control port ");
    const size_t eol = text.find('\n', at);
    if (at != std::string::npos && eol != std::string::npos) {
      port = text.substr(at + 26, eol - at - 26);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ASSERT_FALSE(port.empty()) << ReadFile(log);
  const std::string out = dir_ / "peer";
  auto run = Accept(out, "--kv-peer 127.0.0.1:" + port);
  ASSERT_EQ(run.exit_code, 0) << run.out << ReadFile(log);
  const Written w = ReadWritten(out);
  ASSERT_EQ(w.doc["kv_bandwidth"]["status"], "ok");
  EXPECT_EQ(w.doc["kv_bandwidth"]["peer"], "127.0.0.1:" + port);
  EXPECT_NE(w.html.find("<td>127.0.0.1:" + port + "</td>"), std::string::npos);
  const json& host = w.doc["hosts"][2];
  EXPECT_EQ(host["role"], "KV receiver");
  EXPECT_EQ(host["address"], "127.0.0.1:" + port);
  // The receiver's own report of itself (its CUDA calls ran in its process, not ours).
  ASSERT_TRUE(host["gpu_model"].is_string()) << host.dump();
  EXPECT_EQ(host["gpu_model"], w.doc["kv_bandwidth"]["receiver"]["gpu_model"]);
  EXPECT_EQ(host["nccl_version"].get<std::string>().find("did not say"), std::string::npos);
  EXPECT_EQ(receiver.Wait(std::chrono::seconds(20)), 0);  // it served one driver and ended
}

TEST_F(BenchAcceptanceCommandTest, RefusesUnknownMetricsAndMalformedThresholdsBeforeAnyLoad) {
  const std::string out = dir_ / "bad";
  auto unknown = Accept(out, "--require 'ttft_p99_ms<=800 tokens_per_dollar>=3'");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.out;
  EXPECT_NE(unknown.out.find("unknown metric 'tokens_per_dollar'"), std::string::npos)
      << unknown.out;
  auto malformed = Accept(out, "--require 'ttft_p99_ms=<800'");
  EXPECT_EQ(malformed.exit_code, 1);
  EXPECT_NE(malformed.out.find("ttft_p99_ms=<800"), std::string::npos) << malformed.out;
  auto unmeasured = Accept(out, "--require 'ttft_p95_ms<=800'");
  EXPECT_EQ(unmeasured.exit_code, 1);
  EXPECT_NE(unmeasured.out.find("--metric-percentiles"), std::string::npos) << unmeasured.out;
  // Nothing ran: no KV test, no report.
  for (const std::string& text : {unknown.out, malformed.out, unmeasured.out}) {
    EXPECT_EQ(text.find("running the KV bandwidth test"), std::string::npos) << text;
  }
  EXPECT_TRUE(ReadWritten(out).json_path.empty());
}

}  // namespace
}  // namespace pdserve
