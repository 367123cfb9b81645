// DeadlineWatchdog: one thread that calls `on_expired(id)` when an id's deadline passes, so
// request deadlines hold whatever the network does. It sleeps on a condition variable until the
// earliest deadline, or for kIdleTick when it has none. Schedule wakes it only for a deadline
// before its next look (waking a thread costs a context switch on the caller's core, and every
// request opens with a Schedule); the tick lets a request opened on an idle watchdog go without
// one. Schedule and Erase are safe from any thread, including from inside on_expired;
// on_expired runs on the watchdog's thread with no lock held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace pdserve::kv_transfer {

class DeadlineWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // How long the thread sleeps with no deadline before it looks again.
  static constexpr std::chrono::milliseconds kIdleTick{100};

  explicit DeadlineWatchdog(std::function<void(uint64_t)> on_expired);
  ~DeadlineWatchdog();  // joins the thread; pending deadlines are dropped
  DeadlineWatchdog(const DeadlineWatchdog&) = delete;
  DeadlineWatchdog& operator=(const DeadlineWatchdog&) = delete;

  // (Re)sets id's deadline.
  void Schedule(uint64_t id, Clock::time_point deadline);
  void Erase(uint64_t id);

 private:
  void Run();

  const std::function<void(uint64_t)> on_expired_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, uint64_t> by_time_;  // guarded by mu_
  std::unordered_map<uint64_t, std::multimap<Clock::time_point, uint64_t>::iterator>
      by_id_;          // guarded by mu_
  bool stop_ = false;  // guarded by mu_
  // Guarded by mu_: when the thread looks at the deadlines next, at the latest.
  Clock::time_point next_look_ = Clock::time_point::min();
  std::thread thread_;
};

}  // namespace pdserve::kv_transfer
