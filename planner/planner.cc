#include "planner/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pdserve::planner {

const char* PoolName(Pool pool) { return pool == Pool::kPrefill ? "prefill" : "decode"; }

namespace {

template <typename... Numbers>
std::string Format(const char* format, Numbers... numbers) {
  char text[160];
  std::snprintf(text, sizeof text, format, static_cast<double>(numbers)...);
  return text;
}

}  // namespace

Planner::Planner(PlannerOptions options, std::map<Pool, PoolLimits> limits)
    : options_(std::move(options)) {
  for (const auto& [pool, l] : limits) {
    PoolState& s = pools_[pool];
    s.limits = l;
    s.desired = {l.reserved_floor, 0};
  }
}

Desired Planner::desired(Pool pool) const {
  auto it = pools_.find(pool);
  return it == pools_.end() ? Desired{} : it->second.desired;
}

int Planner::DesiredTotal() const {
  int total = 0;
  for (const auto& [pool, s] : pools_) total += s.desired.reserved + s.desired.burst;
  return total;
}

namespace {

// Workers to add to `running` so that a signal at `ratio` times its target comes back to it,
// if the load spreads evenly over them: at least one. A ratio with no finite answer (an
// infinite predicted wait) asks for kMostMissing; the caller caps the step at the pool's maximum
// and the budget.
int MissingFor(int running, double ratio) {
  constexpr double kMostMissing = 1 << 20;
  const double needed = std::ceil(std::max(1, running) * ratio - 1e-9);
  if (!(needed < kMostMissing)) return static_cast<int>(kMostMissing);  // NaN too
  return std::max(1, static_cast<int>(needed) - running);
}

}  // namespace

Planner::Shortage Planner::ShortBecause(Pool pool, const PoolSignals& s) const {
  const int running = s.reserved + s.burst;
  if (s.queued_requests > 0 && running == 0) {
    return {"no_worker",
            s.queued_requests == 1
                ? std::string("a request waits and no worker runs")
                : std::to_string(s.queued_requests) + " requests wait and no worker runs",
            1};
  }
  if (pool == Pool::kPrefill) {
    if (s.predicted_ttft_s > options_.ttft_slo_s) {
      return {"ttft",
              Format("predicted TTFT %.2f s > SLO %.2f s", s.predicted_ttft_s, options_.ttft_slo_s),
              MissingFor(running, s.predicted_ttft_s / options_.ttft_slo_s)};
    }
    // A few refusals are a burst of arrivals; more than a twentieth of the demand is a load the
    // pool does not carry.
    if (s.refused_requests >= 2 &&
        s.refused_requests * 20 > s.refused_requests + s.started_requests) {
      // The demand it shed, over what it served meanwhile.
      const double demand = static_cast<double>(s.refused_requests + s.started_requests) /
                            std::max(1, s.started_requests);
      return {"refused",
              std::to_string(s.refused_requests) + " request(s) refused at admission for a " +
                  "predicted wait past the TTFT SLO, " + std::to_string(s.started_requests) +
                  " started",
              MissingFor(running, demand)};
    }
    return {};
  }
  if (s.kv_use > options_.kv_high) {
    return {"kv_use", Format("KV use %.0f%% > %.0f%%", 100 * s.kv_use, 100 * options_.kv_high),
            MissingFor(running, s.kv_use / options_.kv_high)};
  }
  const double target = ItlTarget(s);
  if (s.itl_s > target) {
    return {"itl",
            target > options_.itl_slo_s
                ? Format("inter-token latency %.3f s > %.3f s, twice the unloaded %.3f s (SLO "
                         "%.3f s is below it)",
                         s.itl_s, target, s.unloaded_itl_s, options_.itl_slo_s)
                : Format("inter-token latency %.3f s > SLO %.3f s", s.itl_s, target),
            MissingFor(running, s.itl_s / target)};
  }
  return {};
}

double Planner::ItlTarget(const PoolSignals& s) const {
  return std::max(options_.itl_slo_s, 2 * s.unloaded_itl_s);
}

bool Planner::CanLoseOne(Pool pool, const PoolSignals& s) const {
  if (pool != Pool::kPrefill) return true;
  // With one worker fewer, the prompts started lately would keep the rest this busy.
  const int running = s.reserved + s.burst;
  const double without_one = running > 1 ? s.utilisation * running / (running - 1) : s.utilisation;
  return without_one < options_.down_utilisation;
}

bool Planner::Comfortable(Pool pool, const PoolSignals& s) const {
  if (s.queued_requests > 0 || s.refused_requests > 0) return false;  // not while it sheds any
  if (pool == Pool::kPrefill) {
    return s.predicted_ttft_s < options_.down_ratio * options_.ttft_slo_s && CanLoseOne(pool, s);
  }
  // What the batch adds to the unloaded step, against the room the target leaves above it.
  const double unloaded = std::max(0.0, s.unloaded_itl_s);
  return s.kv_use < options_.kv_low &&
         s.itl_s < unloaded + options_.down_ratio * (ItlTarget(s) - unloaded);
}

std::vector<Decision> Planner::Decide(Clock::time_point now,
                                      const std::map<Pool, PoolSignals>& signals) {
  std::vector<Decision> decisions;
  for (auto& [pool, state] : pools_) {
    auto it = signals.find(pool);
    if (it == signals.end()) continue;
    const PoolSignals& s = it->second;
    const bool comfortable = Comfortable(pool, s);
    if (!comfortable) {
      state.comfortable_since = {};
    } else if (state.comfortable_since == Clock::time_point{}) {
      state.comfortable_since = now;
    }
    // Workers it asked for are still starting: their effect is not in the signals yet.
    if (s.starting > 0) continue;
    const Shortage shortage = ShortBecause(pool, s);
    if (!shortage.cause.empty()) {
      const bool cooling =
          state.last_up != Clock::time_point{} && now - state.last_up < options_.up_cooldown;
      const bool turned =
          state.last_down != Clock::time_point{} && now - state.last_down < options_.up_cooldown;
      // The step: the workers the signal says are missing, within the maximum and the budget.
      int step = std::min(shortage.missing, state.limits.burst_max - state.desired.burst);
      if (options_.worker_budget > 0) {
        step = std::min(step, options_.worker_budget - DesiredTotal());
      }
      if (cooling || turned || step <= 0) continue;
      state.desired.burst += step;
      state.last_up = now;
      state.comfortable_since = {};
      decisions.push_back({pool, CapacityClass::kBurst, step, shortage.reason, shortage.cause});
      continue;
    }
    const bool idle = options_.burst_idle.count() > 0 && state.desired.burst > 0 && s.burst > 0 &&
                      s.burst_idle_s >= options_.burst_idle.count() && CanLoseOne(pool, s);
    if (idle) {
      --state.desired.burst;
      state.last_down = now;
      state.comfortable_since = comfortable ? now : Clock::time_point{};
      decisions.push_back(
          {pool, CapacityClass::kBurst, -1,
           Format("a burst worker has had no request for %.0f s (idle limit %.0f s)",
                  s.burst_idle_s, static_cast<double>(options_.burst_idle.count())),
           "burst_idle"});
      continue;
    }
    if (!comfortable || state.desired.burst == 0) continue;
    const bool held = now - state.comfortable_since >= options_.down_hold;
    const bool after_up =
        state.last_up != Clock::time_point{} && now - state.last_up < options_.down_hold;
    if (!held || after_up) continue;
    --state.desired.burst;
    state.last_down = now;
    state.comfortable_since = now;  // the next step down waits a whole window again
    decisions.push_back({pool, CapacityClass::kBurst, -1,
                         "comfortable for " + std::to_string(options_.down_hold.count()) + " s",
                         "comfortable"});
  }
  return decisions;
}

}  // namespace pdserve::planner
