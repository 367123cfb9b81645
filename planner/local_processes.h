// LocalProcesses: the local actuator's hands (docs/architecture.md, "Processes"): starts
// `pdserve` subcommands as child processes of this one, starts a supervised child that exits
// again after a backoff (1 s, doubling to 30 s while it keeps failing within 10 s of its start;
// back to 1 s once it ran for 10 s, or exited 0: drained on SIGTERM), and stops them
// all (SIGTERM, the last started first; SIGKILL past a grace period). `pdserve up` supervises its
// workers with it, so that one that dies is back within seconds while the gateway stays up.
//
// Threads: one owner thread. Children start with every signal unblocked and the default
// dispositions, whatever the owner blocks, and with none of its descriptors but 0, 1 and 2. The
// owner must reap children only through Poll.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace pdserve::planner {

struct LocalProcessesOptions {
  std::string executable = "/proc/self/exe";  // every child runs this, with its own argv
  std::chrono::milliseconds first_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
  // A child that ran this long before it exited (or exited 0) is started again after
  // first_backoff. Long enough for a worker that cannot start (a bad flag, a model that does not
  // load) to fail within it; short enough that one killed now and then under chaos or by the
  // OOM killer is back in a second.
  std::chrono::milliseconds healthy_after{10000};
};

// How a child ended, as `waitpid` said: "exited with status N" or "killed by signal N".
std::string DescribeExit(int wait_status);

class LocalProcesses {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LocalProcesses(LocalProcessesOptions options = {});
  // Stops every child still running (StopAll).
  ~LocalProcesses();
  LocalProcesses(const LocalProcesses&) = delete;
  LocalProcesses& operator=(const LocalProcesses&) = delete;

  // Starts `argv` (argv[0] included) as the child called `name`; with `supervised`, Poll starts
  // it again whenever it exits. The pid, or why fork failed.
  Result<pid_t> Start(const std::string& name, std::vector<std::string> argv, bool supervised);

  // What Poll saw of one child's end.
  struct Exit {
    std::string name;
    pid_t pid = 0;
    int wait_status = 0;
    bool will_restart = false;
    std::chrono::milliseconds backoff{0};  // when it will be started again
  };
  // Reaps the children that exited and starts again the supervised ones whose backoff has
  // passed. Returns the exits it reaped; `restarted` (optional) gets the names started again.
  std::vector<Exit> Poll(Clock::time_point now = Clock::now(),
                         std::vector<std::string>* restarted = nullptr);

  // SIGTERM to the child called `name` (a worker drains, then exits), which is not started again:
  // Poll reaps it. False when no such child runs.
  bool Stop(const std::string& name);

  // SIGTERM to every running child, the last started first; waits for each, SIGKILL after
  // `grace`. Nothing is started again afterwards.
  void StopAll(std::chrono::milliseconds grace = std::chrono::seconds(30));

  // The running child's pid by name, 0 while it waits for its restart or is unknown.
  pid_t PidOf(const std::string& name) const;
  int restarts() const { return restarts_; }

 private:
  struct Child {
    std::string name;
    std::vector<std::string> argv;
    bool supervised = false;
    pid_t pid = 0;  // 0: not running (waiting for its restart)
    Clock::time_point started, restart_at;
    std::chrono::milliseconds backoff{0};
  };
  Status Spawn(Child& child, Clock::time_point now);

  LocalProcessesOptions options_;
  std::vector<Child> children_;  // in the order started
  int restarts_ = 0;
  bool stopped_ = false;
};

}  // namespace pdserve::planner
