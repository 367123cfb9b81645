// End to end: `pdserve sim` processes hosting simulated workers (device sim:PROFILE) behind a
// real gateway on loopback. They register, serve the OpenAI API through the real worker code,
// drain on SIGTERM, a frozen one is dropped by the gateway while its request is retried, and one
// whose steps fail drains and exits while its request is retried; the gateway's own share of the
// time to first token is counted apart from the workers'.
#include <gtest/gtest.h>
#include <unistd.h>
#include <future>
#include <sstream>

#include <fstream>

#include "tests/e2e/process.h"

namespace pdserve {
namespace {

using testing::Curl;
using testing::Process;

class SimTest : public testing::GatewayFixture {
 protected:
  std::unique_ptr<Process> StartSim(std::vector<std::string> extra, const std::string& name) {
    std::vector<std::string> args{"sim", "--model", model_, "--gateway",
                                  "127.0.0.1:" + std::to_string(control_)};
    args.insert(args.end(), extra.begin(), extra.end());
    logs_.push_back(dir_ / (name + ".log"));
    return std::make_unique<Process>(args, logs_.back());
  }

  // The gateway's workers of `role`, or -1 when /health does not answer.
  int Workers(const std::string& role) {
    auto h = Curl(http_, "/health");
    last_health_ = std::to_string(h.status) + " " + h.body;
    if (h.status != 200) return -1;
    int count = 0;
    const auto health = nlohmann::json::parse(h.body);
    for (const auto& w : health["worker_load"]) {
      count += w.value("role", "") == role ? 1 : 0;
    }
    return count;
  }

  // Waits up to `seconds` until the gateway lists exactly `n` workers of `role`.
  bool WaitForWorkers(const std::string& role, int n, int seconds = 60) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (Workers(role) == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string Logs() {
    std::string all = "last /health: " + last_health_ + "\n";
    for (const auto& l : logs_) all += "--- " + l + "\n" + testing::ReadLog(l);
    return all;
  }

  // A profile of fixed step times: `prefill_seconds` a prefill step, 5 ms a decode step.
  std::string WriteProfile(double prefill_seconds = 0.02) {
    const std::string path = dir_ / "fixed.json";
    std::ofstream(path) << R"({
      "name": "fixed", "device": "test",
      "prefill": {"base": )"
                        << prefill_seconds << R"(, "per_token": 0, "per_context": 0},
      "decode": {"base": 0.005, "per_token": 0, "per_context": 0},
      "range": {"prompt_tokens": 4096, "decode_tokens": 256, "max_context": 4096},
      "kv_bytes_per_token": 65536, "kv_bytes_per_second": 1e9, "n_layers": 2,
      "page_size": 16, "kv_pages": 2048, "cold_start_seconds": 0})";
    return path;
  }

  // A healthy pair whose prefill steps take `prefill_seconds`, registered.
  std::unique_ptr<Process> StartHealthyPair(double prefill_seconds) {
    auto sim = StartSim(
        {"--profile", WriteProfile(prefill_seconds), "--prefill", "1", "--decode", "1"}, "healthy");
    EXPECT_TRUE(WaitForWorkers("prefill", 1)) << Logs();
    EXPECT_TRUE(WaitForWorkers("decode", 1)) << Logs();
    return sim;
  }

  // `n` completions sent 100 ms apart, each on its own connection; their statuses. While a
  // healthy worker with 0.5 s prefill steps holds one prompt, the router sends the next elsewhere.
  std::vector<int> PostSpaced(int n, const std::string& prompt);

  std::vector<std::string> logs_;
  std::string last_health_;
};

std::string Completion(const std::string& prompt, int max_tokens, bool stream = false) {
  return nlohmann::json{{"model", "tiny"},
                        {"prompt", prompt},
                        {"max_tokens", max_tokens},
                        {"ignore_eos", true},
                        {"stream", stream}}
      .dump();
}

std::vector<int> SimTest::PostSpaced(int n, const std::string& prompt) {
  std::vector<std::thread> clients;
  std::vector<int> statuses(n);
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      statuses[i] =
          Curl(http_, "/v1/completions", Completion(prompt + " " + std::to_string(i), 4)).status;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& c : clients) c.join();
  return statuses;
}

TEST_F(SimTest, SimulatedWorkersRegisterServeAndDrain) {
  auto sim = StartSim({"--profile", WriteProfile(), "--prefill", "3", "--decode", "5"}, "sim");
  ASSERT_TRUE(WaitForWorkers("prefill", 3)) << Logs();
  ASSERT_TRUE(WaitForWorkers("decode", 5)) << Logs();
  std::string first;
  for (int i = 0; i < 12; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto r = Curl(http_, "/v1/completions", Completion("same prompt", 8));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(r.status, 200) << r.body << Logs();
    const auto body = nlohmann::json::parse(r.body);
    EXPECT_EQ(body["usage"]["completion_tokens"], 8);
    // Tokens are fixed by the prompt, whichever pair served it.
    const std::string text = body["choices"][0]["text"];
    if (i == 0) first = text;
    EXPECT_EQ(text, first);
    // At least the profile's time: one prefill step and seven decode steps.
    EXPECT_GE(seconds, 0.02 + 7 * 0.005);
  }
  auto streamed = Curl(http_, "/v1/completions", Completion("same prompt", 8, true));
  ASSERT_EQ(streamed.status, 200);
  int tokens = 0;
  bool done = false;
  EXPECT_EQ(testing::StreamedText(streamed.body, &tokens, &done), first);
  EXPECT_TRUE(done);

  sim->Signal(SIGTERM);
  EXPECT_EQ(sim->Wait(std::chrono::seconds(30)), 0) << Logs();
  EXPECT_NE(Logs().find("every worker drained"), std::string::npos) << Logs();
  EXPECT_TRUE(WaitForWorkers("prefill", 0, 10));
  EXPECT_TRUE(WaitForWorkers("decode", 0, 10));
}

// The gateway counts its own share of each time to first token apart from its workers': every
// request's part before its first message to a worker, and a stream's first text relayed. Each
// prompt takes a 20 ms prefill step, which must not be in the gateway's share.
TEST_F(SimTest, TheGatewayCountsItsOwnShareOfTheTimeToFirstToken) {
  auto sim = StartHealthyPair(0.02);
  for (int i = 0; i < 5; ++i) {
    const bool stream = i < 3;
    auto r = Curl(http_, "/v1/completions", Completion("own " + std::to_string(i), 4, stream));
    ASSERT_EQ(r.status, 200) << r.body << Logs();
  }
  auto own = [&](const std::string& part, const std::string& what) {
    return testing::MetricValue(http_,
                                "pdserve_gateway_own_seconds_" + what + "{part=\"" + part + "\"}");
  };
  EXPECT_EQ(own("request", "count"), 5);
  EXPECT_EQ(own("first_token", "count"), 3) << "only streams relay a first token";
  EXPECT_EQ(own("total", "count"), 3);
  EXPECT_GT(own("request", "sum"), 0);
  EXPECT_GT(own("first_token", "sum"), 0);
  EXPECT_LT(own("total", "sum"), 3 * 0.02) << "the workers' time counted as the gateway's";
  EXPECT_GE(testing::MetricValue(http_, "pdserve_time_to_first_token_seconds_sum"), 5 * 0.02);
}

// A prefill worker that freezes (its step never ends, its connection stays open) is dropped by
// the gateway once it falls silent, and the request it held is retried on a healthy pair.
TEST_F(SimTest, AFrozenWorkerIsDroppedAndItsRequestRetried) {
  // Prefill steps of 0.5 s on the healthy worker: while it holds one prompt, the router sends
  // the next to the other prefill worker, the frozen one.
  auto healthy = StartHealthyPair(0.5);
  auto frozen = StartSim({"--profile", "zero", "--prefill", "1", "--freeze-after", "0"}, "frozen");
  ASSERT_TRUE(WaitForWorkers("prefill", 2)) << Logs();
  const std::vector<int> statuses = PostSpaced(4, "frozen");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(statuses[i], 200) << "request " << i << Logs();
  // The frozen worker is gone from the gateway; its process still holds the connection.
  EXPECT_TRUE(WaitForWorkers("prefill", 1, 30)) << Logs();
  EXPECT_NE(testing::ReadLog(dir_ / "gateway.log").find("left"), std::string::npos);
  frozen->Signal(SIGTERM);
  healthy->Signal(SIGTERM);
  EXPECT_EQ(healthy->Wait(std::chrono::seconds(30)), 0) << Logs();
  frozen->Wait(std::chrono::seconds(30));
}

// A worker whose engine step fails (a device error) fails its requests as retryable, which the
// gateway retries on a healthy pair, then drains and exits non-zero for its supervisor to start
// a fresh one, rather than stay registered and fail every request sent to it.
TEST_F(SimTest, AWorkerWhoseStepFailsDrainsAndExitsAndItsRequestIsRetried) {
  auto healthy = StartHealthyPair(0.5);
  auto failing = StartSim({"--profile", "zero", "--prefill", "1", "--fail-after", "0"}, "failing");
  ASSERT_TRUE(WaitForWorkers("prefill", 2)) << Logs();
  const std::vector<int> statuses = PostSpaced(4, "failing");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(statuses[i], 200) << "request " << i << Logs();
  // Its only worker failed, drained and ended: the process exits non-zero by itself.
  EXPECT_EQ(failing->Wait(std::chrono::seconds(30)), 1) << Logs();
  const std::string log = testing::ReadLog(dir_ / "failing.log");
  EXPECT_NE(log.find("an engine step failed"), std::string::npos) << log;
  EXPECT_TRUE(WaitForWorkers("prefill", 1, 30)) << Logs();
  // What is left serves.
  EXPECT_EQ(Curl(http_, "/v1/completions", Completion("after", 4)).status, 200) << Logs();
  healthy->Signal(SIGTERM);
  EXPECT_EQ(healthy->Wait(std::chrono::seconds(30)), 0) << Logs();
}

// The same for a decode worker: the zero profile's pool dwarfs the healthy worker's, so the
// router, which prefers free pages, sends it the first request.
TEST_F(SimTest, ADecodeWorkerWhoseStepFailsDrainsAndExitsAndItsRequestIsRetried) {
  auto healthy = StartHealthyPair(0.02);
  auto failing = StartSim({"--profile", "zero", "--decode", "1", "--fail-after", "0"}, "failing");
  ASSERT_TRUE(WaitForWorkers("decode", 2)) << Logs();
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Curl(http_, "/v1/completions", Completion("decode " + std::to_string(i), 4)).status,
              200)
        << Logs();
  }
  EXPECT_EQ(failing->Wait(std::chrono::seconds(30)), 1) << Logs();
  EXPECT_NE(testing::ReadLog(dir_ / "failing.log").find("an engine step failed"), std::string::npos)
      << Logs();
  EXPECT_TRUE(WaitForWorkers("decode", 1, 30)) << Logs();
  healthy->Signal(SIGTERM);
  EXPECT_EQ(healthy->Wait(std::chrono::seconds(30)), 0) << Logs();
}

// CPU seconds process `pid` has used so far (user and system), from /proc/PID/stat.
double CpuSeconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  std::istringstream fields(text.substr(text.rfind(')') + 2));  // after "pid (comm) "
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field && i <= 15; ++i) {
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  }
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A decode worker whose reservation waits for its KV waits for messages: it does not count the
// reservation as work and turn without waiting, which would spin a core per reservation for as
// long as the prompt's prefill and transfer take.
TEST_F(SimTest, ADecodeWorkerWaitingForItsKvDoesNotSpin) {
  // Prefill steps of 3 s, which the simulated prefill worker sleeps through.
  auto sim = StartSim({"--profile", WriteProfile(3.0), "--prefill", "1", "--decode", "1"}, "sim");
  ASSERT_TRUE(WaitForWorkers("prefill", 1)) << Logs();
  ASSERT_TRUE(WaitForWorkers("decode", 1)) << Logs();
  auto answer = std::async(std::launch::async, [&] {
    return Curl(http_, "/v1/completions", Completion("a slow prefill", 2));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // reserved, prefill under way
  const double before = CpuSeconds(sim->pid());
  std::this_thread::sleep_for(std::chrono::seconds(2));
  const double used = CpuSeconds(sim->pid()) - before;
  // Waiting costs next to nothing; a loop turning on the reservation takes a whole core where one
  // is free (figures: docs/benchmarks.md, "Simulated workers: scale").
  EXPECT_LT(used, 0.15) << "the simulated workers used " << used << " s of CPU in 2 s of waiting";
  EXPECT_EQ(answer.get().status, 200) << Logs();
}

TEST_F(SimTest, AnUnknownProfileIsRefusedByName) {
  auto run = testing::RunPdserveWithOutput("sim --gateway 127.0.0.1:" + std::to_string(control_) +
                                           " --profile no-such-profile --decode 1");
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("no profile 'no-such-profile'"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace pdserve
