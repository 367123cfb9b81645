// ActuationLoop: the planner's hands in `pdserve gateway --planner act`. A thread of its own
// applies the latest burst count of each pool through an Actuator (planner/actuator.h), so that
// a slow orchestrator never holds the caller: when a pool's count changes, again after a failure
// (every retry interval), and every reapply interval (an actuator that can tell replaces a
// worker that ended on its own). Counts wanted while one is being applied coalesce: only the
// latest is applied. It logs each count carried out that differs from the last, and failures.
//
// Threads: Want and state from any thread; `on_result` runs on the loop's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "planner/actuator.h"

namespace pdserve::planner {

struct ActuationLoopOptions {
  std::chrono::milliseconds retry{std::chrono::seconds(5)};
  std::chrono::milliseconds reapply{std::chrono::seconds(60)};
  // After every SetBurstWorkers: the pool, the count and how it went.
  std::function<void(Pool, int, const Status&)> on_result;
};

class ActuationLoop {
 public:
  ActuationLoop(std::shared_ptr<Actuator> actuator, ActuationLoopOptions options = {});
  // Waits for an apply in progress to end, then stops; nothing more is applied.
  ~ActuationLoop();
  ActuationLoop(const ActuationLoop&) = delete;
  ActuationLoop& operator=(const ActuationLoop&) = delete;

  // The burst workers `pool` should have, and the order to let them go in (Actuator::
  // SetDrainOrder, passed before each SetBurstWorkers); returns at once.
  void Want(Pool pool, int burst, std::vector<std::string> drain_order = {});

  struct PoolState {
    int wanted = -1;   // the latest count asked for (-1: none yet)
    int applied = -1;  // the latest count the actuator carried out
    int failures = 0;  // in a row
    std::string last_error;
  };
  PoolState state(Pool pool) const;
  const Actuator& actuator() const { return *actuator_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    PoolState state;
    int attempted = -1;                    // the count of the latest call, whatever its outcome
    std::vector<std::string> drain_order;  // the latest Want's
    Clock::time_point due;                 // the next call, when wanted == attempted
  };
  void Run();

  std::shared_ptr<Actuator> actuator_;
  ActuationLoopOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::map<Pool, Entry> pools_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above are ready
};

}  // namespace pdserve::planner
