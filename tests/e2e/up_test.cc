// End to end: `pdserve up` as a new user runs it. A request sent as soon as its gateway listens,
// before the workers registered, completes; "pdserve is up" is printed only once the gateway is
// ready (a route exists); a worker killed under load is started again while the gateway stays
// up, and the stream it served resumes on it; Ctrl-C stops every process and exits 0. Its
// workers are priced out of the box (sample prices, said at start).
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::Curl;
using testing::Process;

// The ports `up` had its gateway write (null if it did not within 5 s).
nlohmann::json PortsOf(const Process& up) {
  return testing::WaitForJsonFile(
      std::filesystem::temp_directory_path() / ("pdserve-up-" + std::to_string(up.pid()) + ".json"),
      std::chrono::seconds(5));
}

// Whether `up` logging to `log` printed that it is up, within two minutes.
bool WaitForUp(const std::string& log) {
  return testing::WaitFor(
      [&] { return testing::ReadLog(log).find("pdserve is up") != std::string::npos; },
      std::chrono::seconds(120));
}

TEST(UpTest, ARequestSentBeforeItIsUpCompletesAndUpMeansReady) {
  TempDir dir;
  const std::string log = dir / "up.log";
  Process up({"up", "--port", "0", "--threads", "1"}, log);
  // Where `up` has its gateway write the ports it bound.
  const std::string ports_file =
      std::filesystem::temp_directory_path() / ("pdserve-up-" + std::to_string(up.pid()) + ".json");
  const nlohmann::json ports = testing::WaitForJsonFile(ports_file, std::chrono::seconds(60));
  ASSERT_FALSE(ports.is_null()) << testing::ReadLog(log);
  const int http = ports["http_port"];
  const std::string model = ports["model"];
  const nlohmann::json body = {{"model", model},
                               {"messages", {{{"role", "user"}, {"content", "early"}}}},
                               {"max_tokens", 4}};
  auto early = std::async(std::launch::async,
                          [&] { return Curl(http, "/v1/chat/completions", body.dump()); });
  ASSERT_TRUE(WaitForUp(log)) << testing::ReadLog(log);
  EXPECT_EQ(Curl(http, "/ready").status, 200) << "up was printed before the gateway was ready";
  const auto answer = early.get();
  EXPECT_EQ(answer.status, 200) << answer.body;
  // Costs out of the box: sample prices, said at start, so the answer's cost is not zero.
  EXPECT_NE(testing::ReadLog(log).find("workers are priced at $2.00 a GPU-hour"), std::string::npos)
      << testing::ReadLog(log);
  const auto usage = nlohmann::json::parse(answer.body, nullptr, false)["usage"];
  EXPECT_GT(usage.value("cost_usd", 0.0), 0.0) << answer.body;
  up.Signal(SIGINT);
  EXPECT_EQ(up.Wait(std::chrono::seconds(30)), 0) << testing::ReadLog(log);
}

// The pid of the child of `parent` whose command line has `word` ("gateway", "decode"), 0 if none.
pid_t ChildPid(pid_t parent, const std::string& word) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');  // pid (comm) state ppid ...
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2 || ppid != parent) {
      continue;
    }
    std::ifstream cmdline(entry.path() / "cmdline");
    const std::string args((std::istreambuf_iterator<char>(cmdline)), {});
    if (args.find(word) != std::string::npos && state != 'Z') return std::stoi(name);
  }
  return 0;
}

// A decode worker killed mid-stream: `up` starts it again within seconds, the gateway never
// stops, and the stream waits for the new worker and resumes there with the text of `pdserve
// generate`.
TEST(UpTest, AKilledWorkerIsStartedAgainAndTheStreamItServedResumes) {
  TempDir dir;
  const std::string log = dir / "up.log";
  Process up({"up", "--port", "0", "--threads", "1"}, log);
  ASSERT_TRUE(WaitForUp(log)) << testing::ReadLog(log);
  const nlohmann::json ports = PortsOf(up);
  ASSERT_FALSE(ports.is_null());
  const int http = ports["http_port"];
  const pid_t gateway = ChildPid(up.pid(), "gateway");
  const pid_t decode = ChildPid(up.pid(), "decode");
  ASSERT_GT(gateway, 0);
  ASSERT_GT(decode, 0);
  const auto streamed =
      Curl(http, "/v1/completions", testing::GreedyStreamBody(ports["model"], "go", 3000), 90,
           /*chunks=*/3, [&] { ::kill(decode, SIGKILL); });
  testing::ExpectStreamMatchesGenerate(streamed.body, 3000, "--prompt go");  // the built-in model
  const std::string said = testing::ReadLog(log);
  EXPECT_NE(said.find("decode-1 (pid " + std::to_string(decode) + ") killed by signal 9"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("started decode-1 again"), std::string::npos) << said;
  const pid_t again = ChildPid(up.pid(), "decode");
  EXPECT_GT(again, 0);
  EXPECT_NE(again, decode);
  EXPECT_EQ(ChildPid(up.pid(), "gateway"), gateway) << "the gateway was started again";
  EXPECT_EQ(Curl(http, "/ready").status, 200);
  up.Signal(SIGINT);
  EXPECT_EQ(up.Wait(std::chrono::seconds(30)), 0) << testing::ReadLog(log);
  EXPECT_EQ(::kill(again, 0), -1) << "the restarted worker outlived up";
}

// `up --autoscale` under `pdserve bench serve` filling its decode worker's KV pages: the gateway's
// planner asks for a burst decode worker and says why, `up` starts it and it registers as burst;
// once the load is gone and the pool has been comfortable for the hold, the planner lets it go and
// `up` drains it (exit 0). No request fails meanwhile.
TEST(UpTest, AutoscaleStartsABurstWorkerUnderLoadAndDrainsItAfter) {
  TempDir dir;
  const std::string log = dir / "up.log";
  Process up({"up", "--port", "0", "--threads", "1", "--ledger", "", "--autoscale", "--prefill",
              "1:1", "--decode", "1:2", "--kv-pages", "64", "--planner-up-cooldown", "1",
              "--planner-down-hold", "2"},
             log);
  ASSERT_TRUE(WaitForUp(log)) << testing::ReadLog(log);
  const nlohmann::json ports = PortsOf(up);
  ASSERT_FALSE(ports.is_null());
  const int http = ports["http_port"];
  // `pdserve bench serve`, 60 requests of 900 tokens four at a time, fills the decode worker's
  // 64 pages until the burst worker starts and takes its share.
  Process bench({"bench",
                 "serve",
                 "--base-url",
                 "http://127.0.0.1:" + std::to_string(http),
                 "--model",
                 ports["model"].get<std::string>(),
                 "--num-prompts",
                 "60",
                 "--max-concurrency",
                 "4",
                 "--random-input-len",
                 "8",
                 "--random-output-len",
                 "900",
                 "--request-rate",
                 "inf",
                 "--result-json",
                 dir / "bench.json",
                 "--progress",
                 "off"},
                dir / "bench.log");
  const bool started = testing::WaitFor(
      [&] { return testing::ReadLog(log).find("starting decode-burst-1") != std::string::npos; },
      std::chrono::seconds(60));
  ASSERT_TRUE(started) << testing::ReadLog(log);
  ASSERT_EQ(bench.Wait(std::chrono::seconds(240)), 0) << testing::ReadLog(dir / "bench.log");
  const auto result = testing::WaitForJsonFile(dir / "bench.json", std::chrono::seconds(5));
  ASSERT_TRUE(result.is_object()) << testing::ReadLog(dir / "bench.log");
  EXPECT_EQ(result["completed"], 60) << result.dump();
  EXPECT_EQ(result["failed"], 0) << result.dump();
  ASSERT_TRUE(testing::WaitFor(
      [&] { return testing::ReadLog(log).find("decode-burst-1 (pid") != std::string::npos; },
      std::chrono::seconds(30)))
      << testing::ReadLog(log);
  const std::string said = testing::ReadLog(log);
  for (const char* line :
       {"planner (advise): decode +1 burst worker(s): KV use", "starting decode-burst-1",
        "decode burst pages=64", "planner (advise): decode -1 burst worker(s): comfortable for 2 s",
        "draining decode-burst-1", ") exited with status 0"}) {
    EXPECT_NE(said.find(line), std::string::npos) << line << "\n" << said;
  }
  EXPECT_EQ(said.find("prefill +1"), std::string::npos) << "a decode-heavy load scales decode only";
  EXPECT_EQ(Curl(http, "/ready").status, 200);
  up.Signal(SIGINT);
  EXPECT_EQ(up.Wait(std::chrono::seconds(30)), 0) << testing::ReadLog(log);
}

// `up --autoscale` with floors of 0 starts no worker; a request sent then waits while the
// planner asks for a burst worker in each pool (requests waiting with no worker), `up` starts
// them, and it is served. Once idle past --burst-idle-seconds both are drained and the pools are
// empty again; a second request brings them back (scale to zero keeps the signal to scale up).
TEST(UpTest, AutoscaleFromZeroServesAndReturnsToZero) {
  TempDir dir;
  const std::string log = dir / "up.log";
  Process up({"up", "--port", "0", "--threads", "1", "--ledger", "", "--autoscale", "--prefill",
              "0:1", "--decode", "0:1", "--planner-up-cooldown", "1", "--planner-down-hold", "2",
              "--burst-idle-seconds", "2"},
             log);
  ASSERT_TRUE(WaitForUp(log)) << testing::ReadLog(log);
  const nlohmann::json ports = PortsOf(up);
  ASSERT_FALSE(ports.is_null());
  const int http = ports["http_port"];
  EXPECT_EQ(Curl(http, "/ready").status, 503) << "no worker yet";
  const std::string body =
      nlohmann::json{{"model", ports["model"]}, {"prompt", "from zero"}, {"max_tokens", 4}}.dump();
  for (int round = 1; round <= 2; ++round) {
    EXPECT_EQ(Curl(http, "/v1/completions", body, 90).status, 200) << testing::ReadLog(log);
    // Both burst workers go once idle, and the pools are empty.
    ASSERT_TRUE(testing::WaitFor(
        [&] {
          const std::string said = testing::ReadLog(log);
          size_t drained = 0;
          for (size_t at = 0; (at = said.find("draining ", at)) != std::string::npos; ++at) {
            ++drained;
          }
          return drained == 2u * round;
        },
        std::chrono::seconds(60)))
        << testing::ReadLog(log);
    ASSERT_TRUE(testing::WaitFor([&] { return Curl(http, "/ready").status == 503; },
                                 std::chrono::seconds(30)));
  }
  const std::string said = testing::ReadLog(log);
  EXPECT_NE(said.find("planner (advise): prefill +1 burst worker(s): a request waits and no "
                      "worker runs"),
            std::string::npos)
      << said;
  EXPECT_NE(said.find("burst worker(s): a burst worker has had no request"), std::string::npos)
      << said;
  up.Signal(SIGINT);
  EXPECT_EQ(up.Wait(std::chrono::seconds(30)), 0) << said;
}

}  // namespace
}  // namespace pdserve
