#include "gateway/burst_asks.h"

#include <algorithm>
#include <vector>

#include "common/percentile.h"

namespace pdserve::gateway {

BurstAsks::BurstAsks(std::chrono::duration<double> assumed_cold_start, Clock clock)
    : assumed_cold_start_(assumed_cold_start), clock_(std::move(clock)) {}

void BurstAsks::Asked(planner::Pool pool, TimePoint when) {
  std::lock_guard lock(mu_);
  asks_[pool].push_back(when);
}

void BurstAsks::Withdrawn(planner::Pool pool) {
  std::lock_guard lock(mu_);
  auto& q = asks_[pool];
  if (!q.empty()) q.pop_back();
}

void BurstAsks::KeepAtMost(planner::Pool pool, int outstanding) {
  std::lock_guard lock(mu_);
  auto& q = asks_[pool];
  while (static_cast<int>(q.size()) > std::max(0, outstanding)) q.pop_front();
}

std::optional<BurstAsks::TimePoint> BurstAsks::Claim(const std::string& role,
                                                     CapacityClass capacity_class) {
  if (capacity_class != CapacityClass::kBurst || (role != "prefill" && role != "decode"))
    return std::nullopt;
  std::lock_guard lock(mu_);
  const planner::Pool pool = role == "prefill" ? planner::Pool::kPrefill : planner::Pool::kDecode;
  auto& q = asks_[pool];
  if (q.empty()) return std::nullopt;
  const TimePoint t = q.front();
  q.pop_front();
  auto& measured = cold_starts_[pool];
  measured.push_back(std::max(0.0, std::chrono::duration<double>(clock_() - t).count()));
  if (measured.size() > kColdStartsKept) measured.pop_front();
  return t;
}

int BurstAsks::outstanding(planner::Pool pool) const {
  std::lock_guard lock(mu_);
  auto it = asks_.find(pool);
  return it == asks_.end() ? 0 : static_cast<int>(it->second.size());
}

std::optional<BurstAsks::TimePoint> BurstAsks::NextArrival(planner::Pool pool) const {
  std::lock_guard lock(mu_);
  auto it = asks_.find(pool);
  const auto cold_start = ColdStartLocked(pool);
  if (it == asks_.end() || cold_start.count() <= 0) return std::nullopt;
  const auto cold = std::chrono::duration_cast<TimePoint::duration>(cold_start);
  const TimePoint now = clock_();
  for (const TimePoint asked : it->second) {
    // Overdue by a whole cold start again: it may never come, and is not counted on.
    if (now <= asked + 2 * cold) return std::max(asked + cold, now);
  }
  return std::nullopt;
}

std::chrono::duration<double> BurstAsks::ColdStart(planner::Pool pool) const {
  std::lock_guard lock(mu_);
  return ColdStartLocked(pool);
}

std::chrono::duration<double> BurstAsks::ColdStartLocked(planner::Pool pool) const {
  auto it = cold_starts_.find(pool);
  if (it == cold_starts_.end() || it->second.empty()) return assumed_cold_start_;
  return std::chrono::duration<double>(
      Median(std::vector<double>(it->second.begin(), it->second.end())));
}

}  // namespace pdserve::gateway
