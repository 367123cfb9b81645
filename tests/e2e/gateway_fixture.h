// For the end-to-end tests: a gateway started on OS-chosen ports (its ready file read back), a
// colocated worker dialling it, and a fixture with the tiny model and a gateway serving it.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/e2e/pdserve_process.h"
#include "tests/model/random_model.h"

namespace pdserve::testing {

// A `pdserve gateway` on OS-chosen ports (its log in `dir`/gateway.log) and the ports it bound;
// process is null when it did not start within 30 s. `control_port` > 0: that control port
// instead (a gateway restarting where its workers dial).
struct StartedGateway {
  std::unique_ptr<Process> process;
  int http_port = 0;
  int control_port = 0;
};

inline StartedGateway StartGateway(const std::string& dir, const std::string& model,
                                   std::vector<std::string> extra_args = {}, int control_port = 0) {
  std::filesystem::remove(dir + "/ready.json");  // a previous gateway's
  std::vector<std::string> args = {"gateway",
                                   "--model",
                                   model,
                                   "--port",
                                   "0",
                                   "--control-port",
                                   std::to_string(control_port),
                                   "--ready-file",
                                   dir + "/ready.json"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  StartedGateway g;
  g.process = std::make_unique<Process>(args, dir + "/gateway.log");
  auto ready = WaitForJsonFile(dir + "/ready.json", std::chrono::seconds(30));
  if (ready.is_null()) {
    g.process.reset();
    return g;
  }
  g.http_port = ready["http_port"];
  g.control_port = ready["control_port"];
  return g;
}

// A colocated worker (`pdserve decode --role both`, one CPU thread) dialling `control_port`,
// with its /metrics on a port of the OS's choosing (WorkerMetric reads it from `log_path`).
inline std::unique_ptr<Process> StartColocatedWorker(const std::string& model, int control_port,
                                                     const std::string& log_path) {
  return std::make_unique<Process>(
      std::vector<std::string>{"decode", "--role", "both", "--model", model, "--threads", "1",
                               "--metrics-port", "0", "--gateway",
                               "127.0.0.1:" + std::to_string(control_port)},
      log_path);
}

// A fixture with the tiny model made in a temporary folder and a gateway serving it on
// OS-chosen ports; each test starts the workers it needs.
class GatewayFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = MakeTinyModel(dir_.path());
    ASSERT_FALSE(model_.empty()) << "make-model failed";
    auto gateway = StartGateway(dir_.path(), model_);
    ASSERT_TRUE(gateway.process) << "gateway did not start";
    gateway_ = std::move(gateway.process);
    http_ = gateway.http_port;
    control_ = gateway.control_port;
  }

  model::testing::TempDir dir_;
  std::string model_;
  std::unique_ptr<Process> gateway_;
  int http_ = 0, control_ = 0;
};

}  // namespace pdserve::testing
