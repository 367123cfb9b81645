// LocalActuator: burst workers as child processes of this one, on this machine (`pdserve gateway
// --planner ... --actuator local`, which `pdserve up --autoscale` runs). More workers: it starts
// each as `POOL-burst-N` (N counts every start, both pools) with the command line worker_argv
// gives; fewer: those first in the drain order (SetDrainOrder: the gateway's names, "host:pid",
// found by pid), then the newest, are sent SIGTERM, drain their requests and exit. A burst
// worker that exits on its own is started again after a backoff (planner/local_processes.h). It
// logs each start, drain and exit. When it is destroyed (or StopAll), every burst worker is
// stopped and waited for.
//
// Threads: SetBurstWorkers from one caller at a time (planner/actuator.h); StopAll and workers
// from any thread. A thread of its own reaps (and restarts) the children every poll interval; the
// children are reaped only here, so the owner must not wait for children it did not start.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "planner/actuator.h"
#include "planner/local_processes.h"

namespace pdserve::planner {

struct LocalActuatorOptions {
  // A burst worker's command line for `pool`, argv[0] included (the program is
  // processes.executable). An error fails the SetBurstWorkers that needed a new worker.
  std::function<Result<std::vector<std::string>>(Pool)> worker_argv;
  LocalProcessesOptions processes;  // default: this program, restarted after 1 s doubling to 30 s
  std::chrono::milliseconds poll{200};          // how often exited workers are reaped
  std::string description = "local processes";  // Describe()
};

class LocalActuator : public Actuator {
 public:
  explicit LocalActuator(LocalActuatorOptions options);
  // StopAll.
  ~LocalActuator() override;
  LocalActuator(const LocalActuator&) = delete;
  LocalActuator& operator=(const LocalActuator&) = delete;

  Status SetBurstWorkers(Pool pool, int count) override;
  void SetDrainOrder(Pool pool, std::vector<std::string> names) override;
  std::string Describe() const override { return "local (" + options_.description + ")"; }

  // SIGTERM to every burst worker, then waits for each, SIGKILL after `grace`. Nothing is started
  // afterwards: SetBurstWorkers then fails.
  void StopAll(std::chrono::milliseconds grace = std::chrono::seconds(30));

  struct Worker {
    std::string name;
    pid_t pid = 0;  // 0 while it waits to be started again
  };
  // `pool`'s burst workers not let go, the oldest first.
  std::vector<Worker> workers(Pool pool) const;

 private:
  void Reap();  // the reaper thread's loop

  const LocalActuatorOptions options_;
  mutable std::mutex mu_;  // guards everything below but reaper_
  std::condition_variable wake_;
  LocalProcesses processes_;
  std::map<Pool, std::vector<std::string>> running_;      // names, the oldest first
  std::map<Pool, std::vector<std::string>> drain_order_;  // SetDrainOrder's
  int started_ = 0;
  bool stopped_ = false;
  std::thread reaper_;  // last: starts once the members above are ready
};

}  // namespace pdserve::planner
