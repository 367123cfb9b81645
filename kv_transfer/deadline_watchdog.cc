#include "kv_transfer/deadline_watchdog.h"

namespace pdserve::kv_transfer {

DeadlineWatchdog::DeadlineWatchdog(std::function<void(uint64_t)> on_expired)
    : on_expired_(std::move(on_expired)), thread_([this] { Run(); }) {}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void DeadlineWatchdog::Schedule(uint64_t id, Clock::time_point deadline) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (auto it = by_id_.find(id); it != by_id_.end()) by_time_.erase(it->second);
    by_id_[id] = by_time_.emplace(deadline, id);
    wake = deadline < next_look_;
  }
  if (wake) cv_.notify_all();
}

void DeadlineWatchdog::Erase(uint64_t id) {
  std::lock_guard lock(mu_);
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    by_time_.erase(it->second);
    by_id_.erase(it);
  }
}

void DeadlineWatchdog::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    const Clock::time_point now = Clock::now();
    if (by_time_.empty()) {
      next_look_ = now + kIdleTick;
      cv_.wait_until(lock, next_look_);
      continue;
    }
    auto first = by_time_.begin();
    // A copy: the node may be erased while the wait has the lock released.
    const Clock::time_point when = first->first;
    if (now < when) {
      next_look_ = when;
      cv_.wait_until(lock, when);
      continue;
    }
    next_look_ = Clock::time_point::min();  // looking now: a Schedule meanwhile needs no wake
    const uint64_t id = first->second;
    by_time_.erase(first);
    by_id_.erase(id);
    lock.unlock();
    on_expired_(id);
    lock.lock();
  }
}

}  // namespace pdserve::kv_transfer
