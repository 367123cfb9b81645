#include "planner/actuation_loop.h"

#include <spdlog/spdlog.h>

namespace pdserve::planner {

ActuationLoop::ActuationLoop(std::shared_ptr<Actuator> actuator, ActuationLoopOptions options)
    : actuator_(std::move(actuator)), options_(std::move(options)), thread_([this] { Run(); }) {}

ActuationLoop::~ActuationLoop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ActuationLoop::Want(Pool pool, int burst, std::vector<std::string> drain_order) {
  {
    std::lock_guard lock(mu_);
    Entry& e = pools_[pool];
    e.drain_order = std::move(drain_order);
    if (e.state.wanted == burst) return;
    e.state.wanted = burst;
  }
  wake_.notify_all();
}

ActuationLoop::PoolState ActuationLoop::state(Pool pool) const {
  std::lock_guard lock(mu_);
  auto it = pools_.find(pool);
  return it == pools_.end() ? PoolState{} : it->second.state;
}

void ActuationLoop::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // The pool whose apply is due first: a changed count now, else at its retry or reapply.
    auto next = Clock::time_point::max();
    Pool pool = Pool::kPrefill;
    for (const auto& [p, e] : pools_) {
      if (e.state.wanted < 0) continue;
      const auto due = e.state.wanted != e.attempted ? Clock::time_point{} : e.due;
      if (due < next) {
        next = due;
        pool = p;
      }
    }
    if (next > Clock::now()) {
      if (next == Clock::time_point::max()) {
        wake_.wait(lock);
      } else {
        wake_.wait_until(lock, next);
      }
      continue;
    }
    const int count = pools_[pool].state.wanted;
    std::vector<std::string> order = pools_[pool].drain_order;
    lock.unlock();
    actuator_->SetDrainOrder(pool, std::move(order));
    const Status s = actuator_->SetBurstWorkers(pool, count);
    if (options_.on_result) options_.on_result(pool, count, s);
    lock.lock();
    Entry& e = pools_[pool];
    e.attempted = count;
    if (s.ok()) {
      if (e.state.applied != count) {
        spdlog::info("planner (act): {} burst {} worker(s) set through {}", count, PoolName(pool),
                     actuator_->Describe());
      }
      e.state.failures = 0;
      e.state.last_error.clear();
      e.state.applied = count;
      e.due = Clock::now() + options_.reapply;
    } else {
      ++e.state.failures;
      e.state.last_error = s.ToString();
      e.due = Clock::now() + options_.retry;
      if (e.state.failures == 1 || e.state.failures % 12 == 0) {
        spdlog::warn(
            "planner (act): {} could not set {} burst {} worker(s) (failure {} in a "
            "row; trying again every {} ms): {}",
            actuator_->Describe(), count, PoolName(pool), e.state.failures, options_.retry.count(),
            s.ToString());
      }
    }
  }
}

}  // namespace pdserve::planner
