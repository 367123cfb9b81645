#include "planner/local_actuator.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>

#include "common/worker_name.h"

namespace pdserve::planner {

LocalActuator::LocalActuator(LocalActuatorOptions options)
    : options_(std::move(options)), processes_(options_.processes), reaper_([this] { Reap(); }) {}

LocalActuator::~LocalActuator() { StopAll(); }

namespace {

// This machine's name as workers register it (worker/registration.cc).
std::string ThisHost() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

}  // namespace

Status LocalActuator::SetBurstWorkers(Pool pool, int count) {
  if (count < 0) return InvalidArgument("a negative count of burst workers");
  std::lock_guard lock(mu_);
  if (stopped_) return FailedPrecondition("the local burst workers were stopped");
  std::vector<std::string>& running = running_[pool];
  while (static_cast<int>(running.size()) < count) {
    auto argv = options_.worker_argv(pool);
    if (!argv.ok()) return argv.status();
    const std::string name = std::string(PoolName(pool)) + "-burst-" + std::to_string(started_ + 1);
    auto pid = processes_.Start(name, *std::move(argv), /*supervised=*/true);
    if (!pid.ok()) return pid.status();
    ++started_;
    running.push_back(name);
    // "NAME (pid N)" is for the line of its exit.
    spdlog::info("the planner wants {} burst {} worker(s): starting {} as process {}", count,
                 PoolName(pool), name, *pid);
  }
  const std::string host = ThisHost();
  while (static_cast<int>(running.size()) > count) {
    // The first of the drain order that is one of these children, else the newest.
    auto victim = std::prev(running.end());
    bool chosen = false;
    for (const std::string& registered : drain_order_[pool]) {
      const auto parts = ParseWorkerName(registered);
      if (!parts || parts->host != host) continue;
      auto it = std::find_if(running.begin(), running.end(), [&](const std::string& name) {
        return processes_.PidOf(name) == static_cast<pid_t>(parts->pid);
      });
      if (it != running.end()) {
        victim = it;
        chosen = true;
        break;
      }
    }
    spdlog::info("the planner wants {} burst {} worker(s): draining {} ({})", count, PoolName(pool),
                 *victim, chosen ? "the idlest" : "the newest");
    processes_.Stop(*victim);
    running.erase(victim);
  }
  return Status::Ok();
}

void LocalActuator::SetDrainOrder(Pool pool, std::vector<std::string> names) {
  std::lock_guard lock(mu_);
  drain_order_[pool] = std::move(names);
}

void LocalActuator::StopAll(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  wake_.notify_all();
  reaper_.join();
  std::lock_guard lock(mu_);
  processes_.StopAll(grace);
  running_.clear();
}

std::vector<LocalActuator::Worker> LocalActuator::workers(Pool pool) const {
  std::lock_guard lock(mu_);
  std::vector<Worker> out;
  auto it = running_.find(pool);
  if (it == running_.end()) return out;
  for (const std::string& name : it->second) out.push_back({name, processes_.PidOf(name)});
  return out;
}

void LocalActuator::Reap() {
  std::unique_lock lock(mu_);
  while (!stopped_) {
    std::vector<std::string> restarted;
    for (const auto& e : processes_.Poll(LocalProcesses::Clock::now(), &restarted)) {
      if (e.will_restart) {
        spdlog::warn("{} (pid {}) {}; starting it again in {} ms", e.name, e.pid,
                     DescribeExit(e.wait_status), e.backoff.count());
      } else {
        spdlog::info("{} (pid {}) {}", e.name, e.pid, DescribeExit(e.wait_status));
      }
    }
    for (const std::string& name : restarted) {
      spdlog::info("started {} again (pid {})", name, processes_.PidOf(name));
    }
    wake_.wait_for(lock, options_.poll, [this] { return stopped_; });
  }
}

}  // namespace pdserve::planner
