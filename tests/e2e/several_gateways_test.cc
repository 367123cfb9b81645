// End to end: two gateways on one PostgreSQL ledger (a throwaway server), simulated prefill and
// decode workers registered with both, nginx in front of them. Under 200 req/s through nginx,
// one gateway is killed with kill -9: every request sent after the kill completes (through the
// other), the workers go on serving, and the ledger holds a row for every request the clients
// saw complete, less at most what the killed gateway had buffered (docs/architecture.md, "The
// ledger's stores and writes"); the report read from PostgreSQL equals the report of the same
// rows copied into an SQLite file.
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/asio.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "ledger/ledger.h"
#include "tests/command_run.h"
#include "tests/e2e/gateway_fixture.h"
#include "tests/e2e/pdserve_process.h"
#include "tests/e2e/serving_metrics.h"
#include "tests/model/random_model.h"
#include "tests/throwaway_postgres.h"

namespace pdserve {
namespace {

using testing::Process;

constexpr char kNginxConf[] = R"(
worker_processes 1;
daemon on;
error_log DIR/nginx-error.log warn;
pid DIR/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path DIR/nginx-body;
  proxy_temp_path DIR/nginx-proxy;
  fastcgi_temp_path DIR/nginx-fastcgi;
  uwsgi_temp_path DIR/nginx-uwsgi;
  scgi_temp_path DIR/nginx-scgi;
  upstream gateways {
    server 127.0.0.1:@A@ max_fails=1 fail_timeout=30s;
    server 127.0.0.1:@B@ max_fails=1 fail_timeout=30s;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:PORT;
    location / {
      proxy_pass http://gateways;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 60s;
      proxy_next_upstream error timeout;
    }
  }
}
)";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

int FreePort() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::address_v4::loopback(), 0});
  return a.local_endpoint().port();
}

// nginx, daemonised, stopped when this goes.
struct Nginx {
  Nginx(const std::string& dir, int a, int b) : dir(dir), port(FreePort()) {
    std::ofstream(dir + "/nginx.conf")
        << Replace(Replace(Replace(Replace(kNginxConf, "DIR", dir), "PORT", std::to_string(port)),
                           "@A@", std::to_string(a)),
                   "@B@", std::to_string(b));
    started = testing::RunShell("nginx -c " + dir + "/nginx.conf -p " + dir).exit_code == 0;
  }
  ~Nginx() { testing::RunShell("nginx -s stop -c " + dir + "/nginx.conf -p " + dir); }
  std::string dir;
  int port;
  bool started = false;
};

// A fresh database on the binary's PostgreSQL server and the tiny model in a fresh folder.
class SeveralGatewaysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto* postgres = testing::ThrowawayPostgres::Shared(&why);
    ASSERT_NE(postgres, nullptr) << why;
    uri = postgres->NewDatabase();
    model = testing::MakeTinyModel(dir.path());
    ASSERT_FALSE(model.empty());
  }
  std::string uri, model;
  model::testing::TempDir dir;
};

TEST_F(SeveralGatewaysTest, KillNineOfOneGatewayCostsOnlyItsStreamsAndTheLedgerKeepsTheRest) {
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  auto a = testing::StartGateway(dir / "a", model, {"--ledger", uri});
  auto b = testing::StartGateway(dir / "b", model, {"--ledger", uri});
  ASSERT_TRUE(a.process && b.process)
      << testing::ReadLog(dir / "a/gateway.log") << testing::ReadLog(dir / "b/gateway.log");
  // Steps of 5 ms (a decode step whatever its batch): a stream of 16 tokens lasts about 100 ms,
  // so that some are in flight on the gateway that is killed.
  const std::string profile = dir / "profile.json";
  std::ofstream(profile) << R"({"name": "steps-5ms", "device": "test",
      "prefill": {"base": 0.005, "per_token": 0, "per_context": 0},
      "decode": {"base": 0.005, "per_token": 0, "per_context": 0},
      "range": {"prompt_tokens": 4096, "decode_tokens": 256, "max_context": 4096},
      "kv_bytes_per_token": 65536, "kv_bytes_per_second": 1e9, "n_layers": 2,
      "page_size": 16, "kv_pages": 4096, "cold_start_seconds": 0})";
  Process sim({"sim", "--model", model, "--profile", profile, "--prefill", "2", "--decode", "2",
               "--gateway",
               "127.0.0.1:" + std::to_string(a.control_port) +
                   ",127.0.0.1:" + std::to_string(b.control_port)},
              dir / "sim.log");
  ASSERT_TRUE(testing::WaitForWorkerLoad(a.http_port, 4, std::chrono::seconds(60)))
      << testing::ReadLog(dir / "sim.log");
  ASSERT_TRUE(testing::WaitForWorkerLoad(b.http_port, 4, std::chrono::seconds(60)))
      << testing::ReadLog(dir / "sim.log");
  Nginx nginx(dir.path(), a.http_port, b.http_port);
  ASSERT_TRUE(nginx.started) << testing::ReadLog(dir / "nginx-error.log");

  // 200 req/s for 6 s through nginx; gateway a is killed 2 s in.
  const std::string results = dir / "bench.json";
  const auto launched = std::chrono::steady_clock::now();
  std::thread load([&] {
    testing::RunShell(std::string(testing::PdserveBinary()) +
                          " bench serve --base-url http://127.0.0.1:" + std::to_string(nginx.port) +
                          " --model tiny --tokenizer " + model +
                          " --num-prompts 1200 --request-rate 200 --random-input-len 32 "
                          "--random-output-len 16 --seed 1 --request-timeout 30 --progress off "
                          "--result-json " +
                          results + " > " + dir / "bench.txt",
                      120);
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  a.process->Kill(SIGKILL);
  const double killed_at =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
  load.join();

  std::ifstream in(results);
  ASSERT_TRUE(in.good()) << testing::ReadLog(dir / "bench.txt");
  auto run = nlohmann::json::parse(in);
  if (run.is_array()) run = run.back();
  const auto& starts = run["start_times"];
  const auto& statuses = run["http_statuses"];
  const auto& errors = run["errors"];
  int completed = 0, after_kill = 0, failed_after_kill = 0, failed_before = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const bool ok = statuses[i] == 200 && errors[i].get<std::string>().empty();
    completed += ok;
    // The load generator's clock starts after its own start-up: a request it sent is counted
    // as after the kill from half a second past it.
    if (starts[i].get<double>() > killed_at + 0.5) {
      ++after_kill;
      if (!ok) {
        ++failed_after_kill;
        ADD_FAILURE() << "request " << i << " sent " << starts[i] << " s in failed: " << statuses[i]
                      << " " << errors[i];
      }
    } else if (!ok) {
      ++failed_before;
    }
  }
  EXPECT_GT(after_kill, 400) << "the load did not go on past the kill";
  EXPECT_EQ(failed_after_kill, 0);
  // Those on the killed gateway then: at most what it held, far below the run.
  EXPECT_LT(failed_before, 100);
  std::printf(
      "several gateways: %d of %zu completed; %d sent after the kill all completed; %d "
      "failed (in flight on the killed gateway)\n",
      completed, starts.size(), after_kill, failed_before);
  std::fflush(stdout);  // before the processes it starts next copy the buffer

  // The workers freed the killed gateway's requests' pages: once idle, every page is free again
  // (as the surviving gateway hears it).
  bool all_free = false;
  for (int i = 0; i < 100 && !all_free; ++i) {
    const auto load = testing::WorkerLoad(b.http_port);
    all_free = load.size() == 4;
    for (const auto& w : load) all_free = all_free && w["free_pages"] == w["kv_pages"];
    if (!all_free) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(all_free) << testing::WorkerLoad(b.http_port).dump();

  // The survivor commits its buffer on SIGTERM; the ledger then holds every completed request
  // but at most the few the killed gateway had buffered.
  b.process->Signal(SIGTERM);
  EXPECT_EQ(b.process->Wait(std::chrono::seconds(30)), 0);
  auto pg = ledger::Ledger::OpenReadOnly(uri);
  ASSERT_TRUE(pg.ok()) << pg.status().ToString();
  auto rows = (*pg)->Rows({});
  auto periods = (*pg)->Periods({}, {});
  ASSERT_TRUE(rows.ok() && periods.ok());
  int ok_rows = 0;
  for (const auto& r : *rows) ok_rows += r.status == ledger::AttemptStatus::kOk;
  EXPECT_LE(ok_rows, completed);
  EXPECT_GE(ok_rows, completed - 10) << "more rows lost than a kill -9 can";
  std::printf(
      "several gateways: %d ledger rows of completed requests for %d completed (%d lost "
      "with the killed gateway's buffer)\n",
      ok_rows, completed, completed - ok_rows);
  std::fflush(stdout);

  // The same rows in SQLite give the same report.
  {
    auto lite = ledger::Ledger::Open({dir / "copy.sqlite"});
    ASSERT_TRUE(lite.ok()) << lite.status().ToString();
    ASSERT_TRUE((*lite)->AppendBatch(*rows).ok());
    ASSERT_TRUE((*lite)->UpsertPeriods(*periods).ok());
  }
  const auto from_pg = testing::RunShell(std::string(testing::PdserveBinary()) +
                                         " report --format json --ledger '" + uri + "'");
  const auto from_file = testing::RunShell(std::string(testing::PdserveBinary()) +
                                           " report --format json --ledger " + dir / "copy.sqlite");
  ASSERT_EQ(from_pg.exit_code, 0) << from_pg.out;
  ASSERT_EQ(from_file.exit_code, 0) << from_file.out;
  EXPECT_EQ(nlohmann::json::parse(from_pg.out), nlohmann::json::parse(from_file.out));
}

// A tenant limited to 60 requests a minute (1 a second), offered 5 a second at each of two
// gateways on one PostgreSQL ledger: once the bucket's first minute is spent, the two together
// admit at most 1.1 a second, not 2.
TEST_F(SeveralGatewaysTest, ATenantsRateLimitHoldsAcrossGateways) {
  std::ofstream(dir / "keys") << "key:acme-key acme rpm=60\n";
  std::vector<testing::StartedGateway> gateways;
  for (const char* name : {"a", "b"}) {
    std::filesystem::create_directories(dir / name);
    gateways.push_back(
        testing::StartGateway(dir / name, model, {"--ledger", uri, "--api-keys", dir / "keys"}));
    ASSERT_TRUE(gateways.back().process) << testing::ReadLog(dir / name + "/gateway.log");
  }
  Process sim({"sim", "--model", model, "--profile", "zero", "--colocated", "2", "--gateway",
               "127.0.0.1:" + std::to_string(gateways[0].control_port) +
                   ",127.0.0.1:" + std::to_string(gateways[1].control_port)},
              dir / "sim.log");
  for (const auto& g : gateways) {
    ASSERT_TRUE(testing::WaitForWorkerLoad(g.http_port, 2, std::chrono::seconds(60), "acme-key"))
        << testing::ReadLog(dir / "sim.log");
  }
  std::vector<std::thread> load;
  for (size_t i = 0; i < gateways.size(); ++i) {
    load.emplace_back([&, i] {
      testing::RunShell(
          "env ACME_KEY=acme-key " + std::string(testing::PdserveBinary()) +
              " bench serve --base-url http://127.0.0.1:" + std::to_string(gateways[i].http_port) +
              " --model tiny --tokenizer " + model +
              " --api-key-env ACME_KEY --num-prompts 125 --request-rate 5 "
              "--random-input-len 8 --random-output-len 4 --seed 1 --progress off "
              "--result-json " +
              dir / ("limit-" + std::to_string(i) + ".json") + " > " +
              dir / ("limit-" + std::to_string(i) + ".txt"),
          120);
    });
  }
  for (auto& t : load) t.join();
  // From 10 s on, after the first minute's 60 are spent (10 a second offered, 1 refilled).
  int steady = 0, refused = 0;
  double window_end = 0;
  for (size_t i = 0; i < gateways.size(); ++i) {
    std::ifstream in(dir / ("limit-" + std::to_string(i) + ".json"));
    ASSERT_TRUE(in.good()) << testing::ReadLog(dir / ("limit-" + std::to_string(i) + ".txt"));
    auto run = nlohmann::json::parse(in);
    if (run.is_array()) run = run.back();
    for (size_t r = 0; r < run["start_times"].size(); ++r) {
      const double at = run["start_times"][r];
      const int status = run["http_statuses"][r];
      refused += status == 429;
      if (at >= 10.0) {
        steady += status == 200;
        window_end = std::max(window_end, at);
      }
    }
  }
  const double window = window_end - 10.0;
  ASSERT_GT(window, 10.0);
  std::printf(
      "several gateways: %d admitted in the last %.1f s at 1 req/s limited, %d refused "
      "(429) in all\n",
      steady, window, refused);
  std::fflush(stdout);
  EXPECT_LE(steady, 1.1 * window + 1) << "two gateways allowed the tenant more than its limit";
  EXPECT_GE(steady, 0.8 * window);
  EXPECT_GT(refused, 100);
}

// Two gateways acting for the planner on one PostgreSQL ledger: only the one holding the lock
// acts (its actuator runs), the other advises; kill -9 of the leader, and the other acts within
// two planner intervals plus the lease.
TEST_F(SeveralGatewaysTest, OnlyTheLeaderActsAndAnotherTakesOverWhenItDies) {
  const auto actions = [&](const std::string& name) { return testing::ReadLog(dir / name); };
  std::vector<testing::StartedGateway> gateways;
  for (const std::string name : {"a", "b"}) {
    std::filesystem::create_directories(dir / name);
    const std::string script = dir / (name + ".sh");
    std::ofstream(script) << "#!/bin/sh\necho \"$@\" >> " << dir / (name + ".actions") << "\n";
    std::filesystem::permissions(script, std::filesystem::perms::owner_all);
    gateways.push_back(testing::StartGateway(
        dir / name, model,
        {"--ledger", uri, "--planner", "act", "--actuator", "command", "--actuator-command", script,
         "--planner-prefill", "0:2", "--planner-decode", "0:2", "--planner-interval", "0.2"}));
    ASSERT_TRUE(gateways.back().process) << testing::ReadLog(dir / name + "/gateway.log");
    if (name == "a") {  // the first leads before the second starts
      for (int i = 0; i < 100 && actions("a.actions").empty(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      ASSERT_FALSE(actions("a.actions").empty()) << testing::ReadLog(dir / "a/gateway.log");
    }
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // ten of b's ticks
  EXPECT_TRUE(actions("b.actions").empty()) << "both gateways acted: " << actions("b.actions");

  gateways[0].process->Kill(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  while (actions("b.actions").empty() &&
         std::chrono::steady_clock::now() - killed < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  ASSERT_FALSE(actions("b.actions").empty()) << testing::ReadLog(dir / "b/gateway.log");
  std::printf("several gateways: the other gateway acted %.2f s after the leader's kill -9\n",
              took);
  std::fflush(stdout);
  // Two intervals (0.4 s), the lease (10 s) and a check of the lock (1 s).
  EXPECT_LE(took, 0.4 + 10 + 1);
}

}  // namespace
}  // namespace pdserve
