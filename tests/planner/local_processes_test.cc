// The local actuator's child processes, with /bin/sh standing in for pdserve: a supervised child
// that exits is started again after a backoff that doubles, an unsupervised one is not, and
// StopAll ends every child, one that ignores SIGTERM after its grace; a child inherits no
// descriptor of its owner's but stdin, stdout and stderr.
#include "planner/local_processes.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

namespace pdserve::planner {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

LocalProcessesOptions Shell() {
  LocalProcessesOptions o;
  o.executable = "/bin/sh";
  o.first_backoff = 100ms;
  o.max_backoff = 400ms;
  o.healthy_after = 10s;
  return o;
}

// Polls until `until` or `done`, collecting exits and restarts with the times they were seen.
struct Seen {
  std::vector<std::pair<Clock::time_point, LocalProcesses::Exit>> exits;
  std::vector<Clock::time_point> restarts;
};
Seen PollFor(LocalProcesses& p, std::chrono::milliseconds how_long,
             const std::function<bool(const Seen&)>& done = {}) {
  Seen seen;
  const auto end = Clock::now() + how_long;
  while (Clock::now() < end && !(done && done(seen))) {
    std::vector<std::string> restarted;
    const auto now = Clock::now();
    for (auto& e : p.Poll(now, &restarted)) seen.exits.emplace_back(now, e);
    for (size_t i = 0; i < restarted.size(); ++i) seen.restarts.push_back(now);
    std::this_thread::sleep_for(5ms);
  }
  return seen;
}

TEST(LocalProcessesTest, ASupervisedChildThatExitsIsStartedAgainWithADoublingBackoff) {
  LocalProcesses p(Shell());
  ASSERT_TRUE(p.Start("crash", {"sh", "-c", "exit 3"}, /*supervised=*/true).ok());
  const Seen seen = PollFor(p, 5s, [](const Seen& s) { return s.restarts.size() >= 4; });
  ASSERT_GE(seen.restarts.size(), 4u);
  ASSERT_GE(seen.exits.size(), 4u);
  EXPECT_EQ(seen.exits[0].second.name, "crash");
  EXPECT_EQ(DescribeExit(seen.exits[0].second.wait_status), "exited with status 3");
  // 100, 200, 400, then 400 ms (the cap): each restart waits at least its backoff after the exit.
  const std::chrono::milliseconds want[] = {100ms, 200ms, 400ms, 400ms};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(seen.exits[i].second.will_restart);
    EXPECT_EQ(seen.exits[i].second.backoff, want[i]) << "exit " << i;
    EXPECT_GE(seen.restarts[i] - seen.exits[i].first, want[i]) << "restart " << i;
  }
  EXPECT_GE(p.restarts(), 4);
}

TEST(LocalProcessesTest, AChildThatRanLongEnoughStartsOverFromTheFirstBackoff) {
  LocalProcessesOptions o = Shell();
  o.healthy_after = 300ms;
  LocalProcesses p(o);
  // Quick exits push the backoff up; then a run longer than healthy_after brings it back.
  ASSERT_TRUE(p.Start("flaky", {"sh", "-c", "exit 1"}, true).ok());
  Seen seen = PollFor(p, 5s, [](const Seen& s) { return s.exits.size() >= 3; });
  ASSERT_GE(seen.exits.size(), 3u);
  EXPECT_EQ(seen.exits[2].second.backoff, 400ms);
  LocalProcesses q(o);
  ASSERT_TRUE(q.Start("slow", {"sh", "-c", "sleep 0.4; exit 1"}, true).ok());
  seen = PollFor(q, 5s, [](const Seen& s) { return s.exits.size() >= 2; });
  ASSERT_GE(seen.exits.size(), 2u);
  EXPECT_EQ(seen.exits[0].second.backoff, 100ms);
  EXPECT_EQ(seen.exits[1].second.backoff, 100ms) << "it ran past healthy_after each time";
}

// A worker that exits 0 drained on request (SIGTERM): it is not crashing, so it is back after
// the first backoff however soon it exits.
TEST(LocalProcessesTest, AChildThatExitsCleanlyIsBackAfterTheFirstBackoff) {
  LocalProcesses p(Shell());
  ASSERT_TRUE(p.Start("drained", {"sh", "-c", "exit 0"}, true).ok());
  const Seen seen = PollFor(p, 5s, [](const Seen& s) { return s.exits.size() >= 3; });
  ASSERT_GE(seen.exits.size(), 3u);
  for (const auto& [at, e] : seen.exits) EXPECT_EQ(e.backoff, 100ms);
}

TEST(LocalProcessesTest, AnUnsupervisedChildIsNotStartedAgain) {
  LocalProcesses p(Shell());
  auto pid = p.Start("once", {"sh", "-c", "kill -9 $$"}, /*supervised=*/false);
  ASSERT_TRUE(pid.ok());
  const Seen seen = PollFor(p, 1s);
  ASSERT_EQ(seen.exits.size(), 1u);
  EXPECT_EQ(seen.exits[0].second.pid, *pid);
  EXPECT_FALSE(seen.exits[0].second.will_restart);
  EXPECT_EQ(DescribeExit(seen.exits[0].second.wait_status), "killed by signal 9 (Killed)");
  EXPECT_TRUE(seen.restarts.empty());
  EXPECT_EQ(p.PidOf("once"), 0);
}

// `pdserve up` forks workers while its gateway holds client sockets (Asio's are not
// close-on-exec): a worker must not hold one open after the gateway closed it.
TEST(LocalProcessesTest, AChildInheritsNoDescriptorOfItsOwners) {
  const int fd = ::open("/dev/null", O_RDONLY);  // no O_CLOEXEC, as a leaked socket would be
  ASSERT_GE(fd, 3);
  LocalProcesses p(Shell());
  auto pid = p.Start("check",
                     {"sh", "-c",
                      "test -e /proc/$$/fd/" + std::to_string(fd) +
                          " && exit 7; test -e /proc/$$/fd/2 || exit 8; exit 0"},
                     /*supervised=*/false);
  ::close(fd);
  ASSERT_TRUE(pid.ok());
  const Seen seen = PollFor(p, 3s, [](const Seen& s) { return !s.exits.empty(); });
  ASSERT_EQ(seen.exits.size(), 1u);
  EXPECT_EQ(DescribeExit(seen.exits[0].second.wait_status), "exited with status 0");
}

TEST(LocalProcessesTest, StopAllEndsEveryChildAndKillsOneThatIgnoresSigterm) {
  LocalProcesses p(Shell());
  auto polite = p.Start("polite", {"sh", "-c", "sleep 30"}, true);
  auto stubborn =
      p.Start("stubborn", {"sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"}, true);
  ASSERT_TRUE(polite.ok() && stubborn.ok());
  std::this_thread::sleep_for(200ms);  // the trap is set
  const auto start = Clock::now();
  p.StopAll(500ms);
  const auto took = Clock::now() - start;
  EXPECT_GE(took, 500ms) << "the stubborn child got its grace";
  EXPECT_LT(took, 5s);
  EXPECT_EQ(::kill(*polite, 0), -1) << "reaped";
  EXPECT_EQ(::kill(*stubborn, 0), -1);
  EXPECT_TRUE(PollFor(p, 300ms).restarts.empty()) << "nothing starts again after StopAll";
  EXPECT_FALSE(p.Start("late", {"sh", "-c", "true"}, false).ok());
}

TEST(LocalProcessesTest, AStoppedChildIsNotStartedAgain) {
  LocalProcesses p(Shell());
  auto pid = p.Start("burst", {"sh", "-c", "sleep 30"}, /*supervised=*/true);
  ASSERT_TRUE(pid.ok());
  EXPECT_TRUE(p.Stop("burst"));
  const Seen seen = PollFor(p, 1s);
  ASSERT_EQ(seen.exits.size(), 1u);
  EXPECT_EQ(seen.exits[0].second.pid, *pid);
  EXPECT_FALSE(seen.exits[0].second.will_restart);
  EXPECT_TRUE(seen.restarts.empty());
  EXPECT_FALSE(p.Stop("burst")) << "it no longer runs";
  EXPECT_FALSE(p.Stop("unknown"));
}

// Whatever the owner blocks (pdserve up blocks SIGINT and SIGTERM to wait for them), a child
// starts with them unblocked: SIGTERM ends it.
TEST(LocalProcessesTest, ChildrenStartWithSignalsUnblocked) {
  sigset_t mask, old;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &mask, &old);
  LocalProcesses p(Shell());
  auto pid = p.Start("child", {"sh", "-c", "sleep 30"}, false);
  ::sigprocmask(SIG_SETMASK, &old, nullptr);
  ASSERT_TRUE(pid.ok());
  std::this_thread::sleep_for(100ms);
  ::kill(*pid, SIGTERM);
  const Seen seen = PollFor(p, 3s, [](const Seen& s) { return !s.exits.empty(); });
  ASSERT_EQ(seen.exits.size(), 1u);
  EXPECT_EQ(DescribeExit(seen.exits[0].second.wait_status), "killed by signal 15 (Terminated)");
}

}  // namespace
}  // namespace pdserve::planner
