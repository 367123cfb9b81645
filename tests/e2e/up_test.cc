// End to end: `pdserve up` as a new user runs it. A request sent as soon as its gateway listens,
// before the workers registered, completes; "pdserve is up" is printed only once the gateway is
// ready (a route exists); Ctrl-C stops every process and exits 0.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <future>

#include "tests/e2e/process.h"
#include "tests/model/random_model.h"

namespace pdserve {
namespace {

using model::testing::TempDir;
using testing::Curl;
using testing::Process;

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
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (testing::ReadLog(log).find("pdserve is up") == std::string::npos &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_NE(testing::ReadLog(log).find("pdserve is up"), std::string::npos)
      << testing::ReadLog(log);
  EXPECT_EQ(Curl(http, "/ready").status, 200) << "up was printed before the gateway was ready";
  const auto answer = early.get();
  EXPECT_EQ(answer.status, 200) << answer.body;
  up.Signal(SIGINT);
  EXPECT_EQ(up.Wait(std::chrono::seconds(30)), 0) << testing::ReadLog(log);
}

}  // namespace
}  // namespace pdserve
