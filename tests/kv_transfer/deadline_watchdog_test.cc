// DeadlineWatchdog: deadlines fire once and on time, whether the watchdog was idle, asleep on a
// later deadline, or busy; erased and rescheduled ids do not fire early.
#include "kv_transfer/deadline_watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace pdserve::kv_transfer {
namespace {

using namespace std::chrono_literals;
using Clock = DeadlineWatchdog::Clock;

// Records when each id expired.
class Expiries {
 public:
  void Add(uint64_t id) {
    std::lock_guard lock(mu_);
    at_[id].push_back(Clock::now());
    cv_.notify_all();
  }
  // Waits up to `limit` for id to expire; its expiry times so far.
  std::vector<Clock::time_point> WaitFor(uint64_t id, std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, limit, [&] { return at_.count(id) > 0; });
    return at_.count(id) ? at_[id] : std::vector<Clock::time_point>{};
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, std::vector<Clock::time_point>> at_;
};

// Generous: machines under test are shared; what matters is "not early, not lost".
constexpr auto kSlack = 2s;

TEST(DeadlineWatchdog, AnIdleWatchdogFiresADeadlineNeitherEarlyNorLate) {
  Expiries e;
  DeadlineWatchdog w([&](uint64_t id) { e.Add(id); });
  std::this_thread::sleep_for(20ms);  // the thread is asleep with nothing to watch
  for (auto delay : {5ms, 150ms}) {   // before and after its idle tick
    const uint64_t id = delay.count();
    const auto deadline = Clock::now() + delay;
    w.Schedule(id, deadline);
    auto fired = e.WaitFor(id, delay + kSlack);
    ASSERT_EQ(fired.size(), 1u) << delay.count() << " ms";
    EXPECT_GE(fired[0], deadline);
    EXPECT_LT(fired[0], deadline + kSlack);
  }
}

TEST(DeadlineWatchdog, AnEarlierDeadlineWakesAWatchdogAsleepOnALaterOne) {
  Expiries e;
  DeadlineWatchdog w([&](uint64_t id) { e.Add(id); });
  w.Schedule(1, Clock::now() + 60s);
  std::this_thread::sleep_for(20ms);  // asleep until the 60 s deadline
  const auto deadline = Clock::now() + 10ms;
  w.Schedule(2, deadline);
  auto fired = e.WaitFor(2, kSlack);
  ASSERT_EQ(fired.size(), 1u);
  EXPECT_GE(fired[0], deadline);
  EXPECT_TRUE(e.WaitFor(1, 0ms).empty());
}

TEST(DeadlineWatchdog, ErasedAndPostponedIdsDoNotFire) {
  Expiries e;
  DeadlineWatchdog w([&](uint64_t id) { e.Add(id); });
  w.Schedule(1, Clock::now() + 30ms);
  w.Schedule(2, Clock::now() + 30ms);
  w.Erase(1);
  w.Schedule(2, Clock::now() + 60s);  // postponed
  w.Schedule(3, Clock::now() + 60ms);
  ASSERT_EQ(e.WaitFor(3, kSlack).size(), 1u);
  EXPECT_TRUE(e.WaitFor(1, 0ms).empty());
  EXPECT_TRUE(e.WaitFor(2, 0ms).empty());
}

TEST(DeadlineWatchdog, ScheduleFromInsideAnExpiryFiresToo) {
  Expiries e;
  DeadlineWatchdog* watchdog = nullptr;
  DeadlineWatchdog w([&](uint64_t id) {
    e.Add(id);
    if (id == 1) watchdog->Schedule(2, Clock::now() + 5ms);
  });
  watchdog = &w;
  w.Schedule(1, Clock::now() + 5ms);
  EXPECT_EQ(e.WaitFor(2, kSlack).size(), 1u);
}

}  // namespace
}  // namespace pdserve::kv_transfer
