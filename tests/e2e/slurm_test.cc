// End to end with a real Slurm: scripts/slurm-local starts a single-node cluster (munge,
// slurmctld, slurmd) on this host, and a gateway with `--planner act --actuator slurm` and no
// decode worker gets a request. Its planner must submit a worker job (deploy/slurm's job
// script), the job's worker register as burst and serve the request; once the worker has been
// idle for --burst-idle-seconds, the planner must cancel the job with SIGTERM, the worker drain
// and the job end. The ledger bills the burst worker from the planner's ask, its cold start
// (made at least 2 s here) included, and the report's figures still add up. Skips, saying why,
// only where Slurm cannot run (not root, no slurm-wlm); a Slurm that should start and does not
// fails the test.
#include <gtest/gtest.h>

#include "tests/command_run.h"
#include "tests/e2e/process.h"

namespace pdserve {
namespace {

using namespace std::chrono_literals;

double NowUnix() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// The cluster's live jobs named `name`, "ID STATE" a line.
std::string Squeue(const std::string& name) {
  return testing::RunShell("squeue --noheader --name=" + name + " --format='%i %T'", 30).out;
}

// What the jobs and the cluster said, for a failure's message.
std::string Diagnostics(const std::string& dir, const std::string& slurm_dir) {
  std::string out = "squeue: " + Squeue("pdserve-decode-burst");
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("job-", 0) == 0) {
      out += "\n--- " + f.path().string() + ":\n" + testing::ReadLog(f.path().string());
    }
  }
  for (const char* log : {"log/slurmctld.log", "log/slurmd.log"}) {
    std::string text = testing::ReadLog(slurm_dir + "/" + log);
    if (text.size() > 3000) text = text.substr(text.size() - 3000);
    out += "\n--- " + std::string(log) + ":\n" + text;
  }
  return out + "\n--- gateway.log:\n" + testing::ReadLog(dir + "/gateway.log");
}

class SlurmCluster {
 public:
  // Under a short folder of its own: slurmd's and munge's sockets live there, and a socket's
  // path has at most 108 bytes.
  SlurmCluster() {
    char folder[] = "/tmp/pdserve-slurm.XXXXXX";
    dir_ = ::mkdtemp(folder) ? folder : "/tmp/pdserve-slurm";
    const testing::CommandRun run = testing::RunShell(
        std::string(PDSERVE_SOURCE_DIR) + "/scripts/slurm-local start " + dir_, 60);
    output_ = run.out;
    started_ = run.exit_code == 0;
    cannot_run_ = run.exit_code == 3;
    if (started_) ::setenv("SLURM_CONF", (dir_ + "/slurm.conf").c_str(), 1);
  }
  ~SlurmCluster() {
    std::system((std::string(PDSERVE_SOURCE_DIR) + "/scripts/slurm-local stop " + dir_ +
                 " > /dev/null 2>&1")
                    .c_str());
    ::unsetenv("SLURM_CONF");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& dir() const { return dir_; }
  bool started() const { return started_; }
  bool cannot_run() const { return cannot_run_; }
  const std::string& output() const { return output_; }

 private:
  std::string dir_, output_;
  bool started_ = false, cannot_run_ = false;
};

TEST(SlurmTest, ThePlannerSubmitsAWorkerJobThatServesAndCancelsItOnceIdle) {
  model::testing::TempDir dir;
  SlurmCluster slurm;
  if (slurm.cannot_run()) GTEST_SKIP() << slurm.output();
  ASSERT_TRUE(slurm.started()) << slurm.output();
  const std::string model = testing::MakeTinyModel(dir.path());
  ASSERT_FALSE(model.empty());
  // The worker's "image pull": two seconds before pdserve starts, so the cold start is long
  // enough to tell billing from the ask apart from billing from registration.
  const std::string slow_start = dir / "slow-start.sh";
  std::ofstream(slow_start) << "#!/bin/sh\nsleep 2\nexec " << testing::PdserveBinary()
                            << " \"$@\"\n";
  std::filesystem::permissions(slow_start, std::filesystem::perms::owner_all);
  const int control = FreePort();
  const std::string gateway_address = "127.0.0.1:" + std::to_string(control);
  auto gateway = testing::StartGateway(
      dir.path(), model,
      {"--planner",
       "act",
       "--planner-interval",
       "0.2",
       "--planner-prefill",
       "1:1",
       "--planner-decode",
       "0:1",
       "--burst-idle-seconds",
       "3",
       "--queue-timeout",
       "60",
       "--ledger",
       dir / "ledger.sqlite",
       "--actuator",
       "slurm",
       "--slurm-job-script",
       std::string(PDSERVE_SOURCE_DIR) + "/deploy/slurm/pdserve-worker.sbatch",
       "--slurm-sbatch-args",
       "--output=" + dir / "job-%j.log",
       "--slurm-env",
       "PDSERVE_GATEWAY=" + gateway_address,
       "--slurm-env",
       "PDSERVE_MODEL=" + model,
       "--slurm-env",
       "PDSERVE_BIN=" + slow_start,
       "--slurm-env",
       "PDSERVE_KV_HOST=127.0.0.1",
       "--slurm-env",
       "PDSERVE_PRICE_PER_GPU_HOUR=3.6",
       "--slurm-env",
       "PDSERVE_WORKER_ARGS=--threads 1"},
      control);
  ASSERT_TRUE(gateway.process) << testing::ReadLog(dir / "gateway.log");
  testing::Process prefill(
      {"prefill", "--model", model, "--threads", "1", "--gateway", gateway_address},
      dir / "prefill.log");
  ASSERT_TRUE(testing::WaitForWorkerLoad(gateway.http_port, 1, 30s))
      << testing::ReadLog(dir / "prefill.log");

  // No decode worker: the request waits while the planner has Slurm start one.
  const double sent = NowUnix();
  auto served = testing::Curl(gateway.http_port, "/v1/completions",
                              R"({"model":"tiny","prompt":"hello slurm","max_tokens":4})");
  const double done = NowUnix();
  const std::string log = testing::ReadLog(dir / "gateway.log");
  ASSERT_EQ(served.status, 200) << served.body << Diagnostics(dir.path(), slurm.dir());
  EXPECT_NE(
      log.find("planner (act): decode +1 burst worker(s): a request waits and no worker runs"),
      std::string::npos)
      << log;
  EXPECT_NE(log.find("slurm: submitted job"), std::string::npos) << log;
  EXPECT_NE(log.find("decode burst"), std::string::npos) << "the job's worker registered as burst";
  EXPECT_GE(done - sent, 2.0) << "the request waited for the job's cold start";

  // Idle for 3 s: the planner lets the worker go, the job's worker drains and the job ends.
  double gone = 0;
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        if (!Squeue("pdserve-decode-burst").empty()) return false;
        gone = NowUnix();
        return true;
      },
      60s))
      << Diagnostics(dir.path(), slurm.dir());
  // The actuator logs the drain once scancel has returned, which can be after the job is gone.
  std::string after;
  EXPECT_TRUE(testing::WaitFor(
      [&] {
        after = testing::ReadLog(dir / "gateway.log");
        return after.find("slurm: draining job") != std::string::npos;
      },
      10s))
      << after;
  EXPECT_NE(after.find("decode -1 burst worker(s): a burst worker has had no request"),
            std::string::npos)
      << after;
  EXPECT_EQ(
      testing::MetricValue(gateway.http_port,
                           "pdserve_planner_desired_workers{class=\"burst\",pool=\"decode\"}"),
      0);

  // The ledger: the burst worker's period starts at the ask (just after `sent`), not at its
  // registration (after the 2 s cold start, just before `done`).
  std::this_thread::sleep_for(500ms);
  std::ofstream(dir / "prices.json") << "{}";
  const std::string report =
      testing::RunPdserve("report --ledger " + dir / "ledger.sqlite" + " --prices " +
                          dir / "prices.json" + " --format json");
  const auto json = nlohmann::json::parse(report, nullptr, false);
  ASSERT_TRUE(json.is_object()) << report;
  bool found = false;
  for (const auto& w : json["workers"]) {
    if (w["capacity_class"] != "burst") continue;
    found = true;
    const double uptime = w["uptime_seconds"].get<double>();
    // start = end - uptime, and end <= gone.
    EXPECT_LT(gone - uptime, done - 1.5)
        << "billed from registration, not from the ask: " << w.dump();
    EXPECT_GT(gone - uptime, sent - 1.0) << w.dump();
    EXPECT_NEAR(w["capacity_cost_usd"].get<double>(), uptime * 3.6 / 3600, 1e-9) << w.dump();
    EXPECT_NEAR(w["conservation_residual_usd"].get<double>(), 0, 1e-9) << w.dump();
    EXPECT_GT(w["idle_waste_usd"].get<double>(), 0) << "its cold start and idle time: " << w.dump();
  }
  EXPECT_TRUE(found) << report;
}

}  // namespace
}  // namespace pdserve
