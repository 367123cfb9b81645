// The local actuator with /bin/sh and sleep standing in for a pdserve worker: a count starts that
// many children of the pool and the same count again starts none; a lower count drains the newest
// (SIGTERM), which is reaped and not started again; a worker that dies on its own is; pools are
// apart; a command line that cannot be made fails the call; StopAll ends every child.
#include "planner/local_actuator.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "common/worker_name.h"
#include "tests/eventually.h"
#include "tests/temp_dir.h"

namespace pdserve::planner {
namespace {

using namespace std::chrono_literals;

// Workers that note each start as a line in `starts` (when given), then sleep.
LocalActuatorOptions Sleepers(std::vector<Pool>* asked = nullptr, const std::string& starts = "") {
  LocalActuatorOptions o;
  o.processes.executable = "/bin/sh";
  o.processes.first_backoff = 50ms;
  o.poll = 20ms;
  o.worker_argv = [asked, starts](Pool pool) -> Result<std::vector<std::string>> {
    if (asked) asked->push_back(pool);
    const std::string note = starts.empty() ? "" : "echo started >> '" + starts + "'; ";
    return std::vector<std::string>{"sh", "-c", note + "exec sleep 60"};
  };
  return o;
}

int Lines(const std::string& path) {
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

// Whether a process `pid` exists (a zombie not yet reaped still does).
bool Exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

std::vector<std::string> Names(const std::vector<LocalActuator::Worker>& workers) {
  std::vector<std::string> names;
  for (const auto& w : workers) names.push_back(w.name);
  return names;
}

TEST(LocalActuatorTest, StartsTheCountAndDrainsTheNewestExtraOnes) {
  ::pdserve::testing::TempDir dir;
  const std::string starts = dir / "starts";
  std::vector<Pool> asked;
  LocalActuator actuator(Sleepers(&asked, starts));
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  const auto two = actuator.workers(Pool::kDecode);
  ASSERT_EQ(Names(two), (std::vector<std::string>{"decode-burst-1", "decode-burst-2"}));
  for (const auto& w : two) EXPECT_TRUE(w.pid > 0 && Exists(w.pid)) << w.name;
  EXPECT_EQ(asked, (std::vector<Pool>{Pool::kDecode, Pool::kDecode}));

  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  EXPECT_EQ(asked.size(), 2u) << "the same count again starts nothing";
  EXPECT_EQ(actuator.workers(Pool::kDecode)[1].pid, two[1].pid);

  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kPrefill, 1).ok());
  EXPECT_EQ(Names(actuator.workers(Pool::kPrefill)), (std::vector<std::string>{"prefill-burst-3"}));

  ASSERT_TRUE(testing::Eventually([&] { return Lines(starts) == 3; }, 5s)) << Lines(starts);
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
  EXPECT_EQ(Names(actuator.workers(Pool::kDecode)), (std::vector<std::string>{"decode-burst-1"}));
  // The newest went (SIGTERM, reaped by the actuator) and is not started again; the oldest runs.
  EXPECT_TRUE(testing::Eventually([&] { return !Exists(two[1].pid); }, 5s));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(Lines(starts), 3) << "a drained worker is not started again";
  EXPECT_EQ(actuator.workers(Pool::kDecode).size(), 1u);
  EXPECT_TRUE(Exists(two[0].pid));
  EXPECT_EQ(actuator.workers(Pool::kPrefill).size(), 1u) << "pools are apart";

  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 0).ok());
  EXPECT_TRUE(actuator.workers(Pool::kDecode).empty());
  EXPECT_TRUE(testing::Eventually([&] { return !Exists(two[0].pid); }, 5s));
}

// The gateway's drain order names workers as they registered ("host:pid"): the idlest of them
// goes, not the newest; names of other hosts or processes are passed over.
TEST(LocalActuatorTest, TheDrainOrdersFirstWorkerGoesBeforeTheNewest) {
  LocalActuator actuator(Sleepers());
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 3).ok());
  const auto three = actuator.workers(Pool::kDecode);
  ASSERT_EQ(three.size(), 3u);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const auto name = [&](pid_t pid) { return WorkerName(host, pid, ""); };
  actuator.SetDrainOrder(Pool::kDecode,
                         {"elsewhere:" + std::to_string(three[2].pid), "sim-decode-1", name(1),
                          name(three[0].pid), name(three[2].pid)});
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  EXPECT_EQ(Names(actuator.workers(Pool::kDecode)),
            (std::vector<std::string>{"decode-burst-2", "decode-burst-3"}))
      << "the idlest, decode-burst-1, went";
  EXPECT_TRUE(testing::Eventually([&] { return !Exists(three[0].pid); }, 5s));
  // None of the order runs: the newest goes.
  actuator.SetDrainOrder(Pool::kDecode, {name(three[0].pid)});
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
  EXPECT_EQ(Names(actuator.workers(Pool::kDecode)), (std::vector<std::string>{"decode-burst-2"}));
}

TEST(LocalActuatorTest, AWorkerThatDiesOnItsOwnIsStartedAgain) {
  LocalActuator actuator(Sleepers());
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kPrefill, 1).ok());
  const pid_t first = actuator.workers(Pool::kPrefill).at(0).pid;
  // pid is sh's, which execs sleep: the same process.
  ASSERT_GT(first, 0);
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  EXPECT_TRUE(testing::Eventually(
      [&] {
        const pid_t now = actuator.workers(Pool::kPrefill).at(0).pid;
        return now > 0 && now != first;
      },
      5s));
  EXPECT_EQ(Names(actuator.workers(Pool::kPrefill)), (std::vector<std::string>{"prefill-burst-1"}));
}

TEST(LocalActuatorTest, ACommandLineThatCannotBeMadeFailsTheCall) {
  LocalActuatorOptions o = Sleepers();
  o.worker_argv = [](Pool) -> Result<std::vector<std::string>> {
    return Unavailable("the gateway's control port is not bound yet");
  };
  LocalActuator actuator(o);
  const Status s = actuator.SetBurstWorkers(Pool::kDecode, 1);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("not bound yet"), std::string::npos) << s.ToString();
  EXPECT_TRUE(actuator.workers(Pool::kDecode).empty());
  EXPECT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 0).ok()) << "none to start, none to make";
}

TEST(LocalActuatorTest, StopAllEndsEveryWorkerAndStartsNoMore) {
  LocalActuator actuator(Sleepers());
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kPrefill, 1).ok());
  ASSERT_TRUE(actuator.SetBurstWorkers(Pool::kDecode, 2).ok());
  std::vector<pid_t> pids;
  for (Pool pool : {Pool::kPrefill, Pool::kDecode}) {
    for (const auto& w : actuator.workers(pool)) pids.push_back(w.pid);
  }
  ASSERT_EQ(pids.size(), 3u);
  actuator.StopAll(5s);
  for (pid_t pid : pids) EXPECT_FALSE(Exists(pid)) << pid;
  EXPECT_FALSE(actuator.SetBurstWorkers(Pool::kDecode, 1).ok());
  EXPECT_TRUE(actuator.workers(Pool::kDecode).empty());
}

}  // namespace
}  // namespace pdserve::planner
