// End to end: `pdserve gateway --planner advise`. With requests waiting and no worker, the
// planner asks for a burst worker in each pool, says why in the log, and exports what it wants;
// once workers register and the request completes, it asks for nothing more.
#include <gtest/gtest.h>

#include <future>

#include "tests/e2e/process.h"

namespace pdserve {
namespace {

using testing::Curl;

TEST(PlannerAdviseTest, RequestsWaitingWithNoWorkerMakeThePlannerAskForWorkers) {
  model::testing::TempDir dir;
  const std::string model = testing::MakeTinyModel(dir.path());
  ASSERT_FALSE(model.empty());
  auto gateway = testing::StartGateway(dir.path(), model,
                                       {"--planner", "advise", "--planner-interval", "0.1",
                                        "--planner-prefill", "0:2", "--planner-decode", "1:3"});
  ASSERT_TRUE(gateway.process);
  const int http = gateway.http_port;
  auto desired = [&](const std::string& pool, const std::string& cls) {
    return testing::MetricValue(
        http, "pdserve_planner_desired_workers{class=\"" + cls + "\",pool=\"" + pool + "\"}");
  };
  EXPECT_EQ(desired("prefill", "reserved"), 0);
  EXPECT_EQ(desired("decode", "reserved"), 1);
  EXPECT_EQ(desired("decode", "burst"), 0);
  const std::string body = R"({"model":"tiny","prompt":"wait","max_tokens":3})";
  auto waiting =
      std::async(std::launch::async, [&] { return Curl(http, "/v1/completions", body); });
  ASSERT_TRUE(
      testing::WaitFor([&] { return desired("decode", "burst") == 1; }, std::chrono::seconds(10)))
      << testing::ReadLog(dir / "gateway.log");
  EXPECT_EQ(desired("prefill", "burst"), 1);
  const std::string log = testing::ReadLog(dir / "gateway.log");
  EXPECT_NE(log.find("planner (advise): prefill +1 burst worker(s): a request waits and no worker "
                     "runs"),
            std::string::npos)
      << log;
  // Workers come (what an actuator would start); the request completes, and with it served the
  // planner asks for nothing more (its cooldown and hold keep it from flapping meanwhile).
  testing::Process prefill({"prefill", "--model", model, "--threads", "1", "--gateway",
                            "127.0.0.1:" + std::to_string(gateway.control_port)},
                           dir / "prefill.log");
  testing::Process decode({"decode", "--role", "decode", "--model", model, "--threads", "1",
                           "--gateway", "127.0.0.1:" + std::to_string(gateway.control_port)},
                          dir / "decode.log");
  EXPECT_EQ(waiting.get().status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(
      testing::MetricValue(
          http,
          "pdserve_planner_decisions_total{direction=\"up\",pool=\"decode\",reason=\"no_worker\"}"),
      1);
  EXPECT_EQ(desired("decode", "burst"), 1) << "a step down waits for a whole comfortable window";
}

}  // namespace
}  // namespace pdserve
